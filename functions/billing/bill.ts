/**
 * What a generation is billed, and the one write that bills it. The usage is the upstream's report
 * when it sent a readable one, else the gateway's estimate (flagged); either way held to what the
 * request could have used (usage-bounds.ts), every adjustment logged with the raw report,
 * counted and kept on the ledger entry. Then one conditional write records the ledger entry under the
 * generation id (which must not exist yet) and deducts the cost.
 */

import type { Deadlines } from '../completions/deadlines.js';
import type { Principal } from '../core/access.js';
import type { ChatRequest } from '../core/schemas.js';
import { AccountNotFoundError, type ChargeEntry, type Hold, type Store, sliceOf } from '../core/store.js';
import { cutToCodePoints } from '../core/strings.js';
import type { UpstreamTarget } from '../core/tiers.js';
import { CountBudget, estimatePromptTokens, estimateTextTokens } from '../core/tokens.js';
import { collectLargeRequestGarbage, LARGE_REQUEST_BYTES } from '../shared/memory.js';
import {
  logger,
  recordBillingFailure,
  recordSettlementContention,
  recordSettlementDeferred,
  recordUsageOutOfBounds,
} from '../shared/observability.js';
import { costToUsd, nanoToUsd } from './money.js';
import { priceUsage, type TokenUsage } from './pricing.js';
import type { UsageReport } from './usage.js';
import { boundUsage } from './usage-bounds.js';
import { GENERATION_USAGE_MESSAGE } from './usage-line.js';
import { usageRecordOf } from './usage-record.js';

/** The facts of a generation a bill is made from. */
export interface Billable {
  id: string;
  caller: Principal;
  request: ChatRequest;
  target: UpstreamTarget;
  deadlines: Deadlines;
  /** What the gateway bounds this request's usage by (usage-bounds.ts). */
  outputCap: number;
  promptBound: number;
  /** The request body's size in bytes: a large one's garbage is collected before its estimate. */
  bodyBytes: number;
  /** The hold this request placed, released by its settlement; none on the fast path. */
  hold: Hold | undefined;
}

/** What the client was sent, and what the upstream said about it. */
export interface Delivered {
  report: UsageReport | undefined;
  /** Exactly the text the client received: what the bill is bounded by, or estimated from. */
  text: string;
  /** Why the bill is not the report as sent (a cut, an error), for the ledger entry. */
  notes: string[];
  finishReason: string | undefined;
  /**
   * The gateway cut the reply (output cap or deadline): its completion tokens are estimated from the
   * delivered text, since the upstream's report (and cost) covers text the client never got.
   */
  cut: boolean;
}

/** A priced generation: its billed usage and the ledger entry that records it. */
export interface Bill {
  usage: TokenUsage;
  billedNano: bigint;
  entry: ChargeEntry;
}

/**
 * The bill of what was delivered: the usage decided and bounded, priced, and its ledger entry built.
 * Nothing is written: the reply carries this exact cost before the settlement records it.
 */
export async function price(generation: Billable, delivered: Delivered): Promise<Bill> {
  const { report } = delivered;
  const adjustments = [...delivered.notes];
  const budget = new CountBudget(generation.deadlines.estimate);
  let reported: TokenUsage;
  let estimated = false;
  if (report && 'usage' in report) {
    reported = report.usage;
    adjustments.push(...report.notes);
    if (delivered.cut) {
      const { reportedCostUsd: _coversUndelivered, ...counts } = reported;
      reported = { ...counts, completionTokens: await estimateTextTokens(delivered.text, budget) };
      adjustments.push('completion tokens estimated from the delivered text');
      estimated = true;
    }
  } else {
    if (report) adjustments.push(`unusable usage report: ${report.invalid}`);
    // Counting grows V8's young generation to its limit: the upstream request's copies go first.
    if (generation.bodyBytes >= LARGE_REQUEST_BYTES) collectLargeRequestGarbage();
    // Counting stops in time for the settlement: what is left is estimated at the rate counted.
    reported = {
      promptTokens: await estimatePromptTokens(generation.request.messages, budget),
      completionTokens: await estimateTextTokens(delivered.text, budget),
      cachedTokens: 0,
    };
    estimated = true;
  }
  if (budget.extrapolatedBytes > 0)
    adjustments.push(
      `estimate: ${budget.extrapolatedBytes} bytes not counted in time, estimated at the counted rate`,
    );
  const bounded = boundUsage(
    reported,
    {
      outputCap: generation.outputCap,
      promptBound: generation.promptBound,
      completionTextBytes: Buffer.byteLength(delivered.text),
    },
    generation.target.prices,
  );
  adjustments.push(...bounded.adjustments);
  // Flagged (logged with the raw report and counted) when the upstream's report was not billed as sent.
  const misreported =
    bounded.adjustments.length > 0 ||
    (report !== undefined && ('invalid' in report || report.notes.length > 0));
  if (misreported) {
    recordUsageOutOfBounds({
      generationId: generation.id,
      accountId: generation.caller.accountId,
      tier: generation.request.model,
      upstreamModel: generation.target.model,
      // The upstream's own words, for the provider conversation; bounded by the body size limits.
      reportedUsage: report?.raw,
      adjustments,
    });
  }
  const usage = bounded.usage;
  const { upstreamCost, billedNano } = priceUsage(usage, generation.target);
  const entry: ChargeEntry = {
    accountId: generation.caller.accountId,
    generationId: generation.id,
    ...sliceOf(generation.caller),
    keyId: generation.caller.keyId,
    tier: generation.request.model,
    upstreamModel: generation.target.model,
    promptTokens: usage.promptTokens,
    completionTokens: usage.completionTokens,
    cachedTokens: usage.cachedTokens,
    upstreamCostUsd: costToUsd(upstreamCost),
    billedNano,
    estimated,
    ...(adjustments.length > 0 ? { usageAdjusted: adjustments.join('; ').slice(0, 1_000) } : {}),
    ...userField(generation.request),
    ...(delivered.finishReason ? { finishReason: delivered.finishReason } : {}),
    // The generation's own time (its id carries the same second), not the settlement's.
    createdAt: new Date(generation.deadlines.startedAt).toISOString(),
  };
  return { usage, billedNano, entry };
}

/**
 * One conditional write: the ledger entry under the generation id and the deduction (idempotent by
 * generation id). Runs after the reply, or for a held request before its reply ends (generation.ts:
 * it releases the hold). Its full record is logged first, as one line (`generation usage`, the
 * generation's only line when it settles), and a held request keeps it on its hold too: should the
 * function die before the write, the sweeper settles the hold from it once it expires.
 * A write that meets other transactions is sent again until its deadline nears; one still unwritten
 * then is deferred: its record kept on its hold item (one of amount 0 if it has no hold) for the
 * sweeper's next run, counted (`SettlementsDeferred`). Only a settlement that can be neither written
 * nor deferred is a billing failure (logged with its record for `admin bill-logged`, counted in
 * `BillingFailures`). It never throws: the reply carries the cost either way.
 */
export async function settle(
  bill: Bill,
  generation: Pick<Billable, 'hold' | 'deadlines'>,
  store: Pick<Store, 'settleCharge' | 'recordUsageOnHold' | 'deferSettlement'>,
): Promise<'settled' | 'deferred' | 'failed'> {
  const { entry, billedNano } = bill;
  const { hold, deadlines } = generation;
  const record = usageRecordOf(entry, hold);
  // The generation's one log line when all goes well (a settled generation writes nothing more, no
  // metrics line either: the ledger is its record). Latency is the reply's: the settlement follows it.
  logger.info(GENERATION_USAGE_MESSAGE, {
    record,
    billedUsd: nanoToUsd(billedNano),
    // The BilledMicroUsd metric's value (a statistic, not money: the ledger is the record), read from
    // this line with the tokens by the stack's metric filters (lib/infra/generation-metrics.ts).
    billedMicroUsd: Number(billedNano / 1000n),
    latencyMs: Date.now() - deadlines.startedAt,
  });
  const recordText = JSON.stringify(record);
  // The hold already stands for this generation: with its record on it, a function that dies now
  // still leaves the sweeper all it needs. Best effort: the log line is the fallback.
  if (hold) await store.recordUsageOnHold(hold, recordText).catch(() => false);
  const deadline = deadlines.settleCall();
  // What is left of the time after the retries is the deferral's.
  const retryUntil = deadline - Math.min(DEFER_RESERVE_MS, Math.max(0, deadline - Date.now()) / 3);
  const contention = { conflicts: 0, retries: 0 };
  try {
    await store.settleCharge(entry, { ...(hold ? { hold } : {}), deadline: retryUntil, contention });
    return 'settled';
  } catch (error) {
    if (error instanceof AccountNotFoundError) {
      recordBillingFailure({ ...entry, billedNano: undefined, billedUsd: nanoToUsd(billedNano) }, error);
      return 'failed';
    }
    try {
      const deferred = await store.deferSettlement(entry, recordText, {
        ...(hold ? { hold } : {}),
        deadline,
      });
      // Committed after all, its answer lost: settled, not a failure.
      if (deferred === 'already-settled') return 'settled';
      recordSettlementDeferred(entry.generationId, error);
      return 'deferred';
    } catch (deferError) {
      // The full usage record, so the charge can be applied later; bigint becomes decimal text.
      recordBillingFailure({ ...entry, billedNano: undefined, billedUsd: nanoToUsd(billedNano) }, deferError);
      return 'failed';
    }
  } finally {
    if (contention.retries > 0 || contention.conflicts > 0) recordSettlementContention(contention);
  }
}

/** Kept back from the settlement's deadline for writing it down as deferred, should it not commit. */
const DEFER_RESERVE_MS = 2_000;

/**
 * The request's end-user id (`user`, or OpenAI's newer `safety_identifier`), at most 256 characters,
 * cut on a code point and with any lone surrogate replaced: a client's string is stored as is, never
 * as something the database or a header refuses.
 */
function userField(request: ChatRequest): { user?: string } {
  const user = request.user ?? request.safety_identifier;
  return typeof user === 'string' && user !== '' ? { user: cutToCodePoints(user, 256) } : {};
}
