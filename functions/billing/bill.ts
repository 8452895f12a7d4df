/**
 * What a generation is billed. The usage is the upstream's report when it sent a readable one, else
 * the gateway's estimate (flagged); either way held to what the request could have used
 * (usage-bounds.ts), every adjustment logged with the raw report, counted and kept on the ledger
 * entry, then priced (pricing.ts). Nothing is written here: settle.ts records the bill.
 */
import type { Principal } from '../core/access.js';
import { costToUsd } from '../core/money.js';
import type { ChatRequest } from '../core/schemas.js';
import { type ChargeEntry, type Hold, sliceOf } from '../core/store.js';
import { cutToCodePoints } from '../core/strings.js';
import type { UpstreamTarget } from '../core/tiers.js';
import { CountBudget, estimatePromptTokens, estimateTextTokens } from '../core/tokens.js';
import type { UsageReport } from '../core/usage.js';
import { collectLargeRequestGarbage, LARGE_REQUEST_BYTES } from '../shared/memory.js';
import { recordUsageOutOfBounds } from '../shared/observability.js';
import { priceUsage, type TokenUsage } from './pricing.js';
import { boundUsage } from './usage-bounds.js';

/** The facts of a generation a bill is made from. */
export interface Billable {
  id: string;
  caller: Principal;
  request: ChatRequest;
  target: UpstreamTarget;
  deadlines: BillDeadlines;
  /** What the gateway bounds this request's usage by (usage-bounds.ts). */
  outputCap: number;
  promptBound: number;
  /** The request body's size in bytes: a large one's garbage is collected before its estimate. */
  bodyBytes: number;
  /** The hold this request placed, released by its settlement; none on the fast path. */
  hold: Hold | undefined;
}

/** The times a bill keeps to, epoch ms (completions/deadlines.ts computes them once per generation). */
interface BillDeadlines {
  /** When the generation started: its ledger entry's time. */
  readonly startedAt: number;
  /** Counting tokens for an estimate stops here, so the settlement still runs in time. */
  readonly estimate: number;
  /** The settlement call's own deadline, from now. */
  settleCallBy(): number;
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
 * The request's end-user id (`user`, or OpenAI's newer `safety_identifier`), at most 256 characters,
 * cut on a code point and with any lone surrogate replaced: a client's string is stored as is, never
 * as something the database or a header refuses.
 */
function userField(request: ChatRequest): { user?: string } {
  const user = request.user ?? request.safety_identifier;
  return typeof user === 'string' && user !== '' ? { user: cutToCodePoints(user, 256) } : {};
}
