/**
 * The one write that bills a generation: its ledger entry under the generation id (which must not
 * exist yet) and the deduction of its cost, in one conditional transaction through the store port
 * (core/store.ts; adapters/dynamodb/ledger.ts), retried, else deferred to the sweeper.
 */
import { usageSigningKey } from '../adapters/secrets.js';
import { nanoToUsd } from '../core/money.js';
import { AccountNotFoundError, type Store } from '../core/store.js';
import {
  logger,
  recordBillingFailure,
  recordSettlementContention,
  recordSettlementDeferred,
  recordUsageRecordFailure,
} from '../shared/observability.js';
import type { Bill, Billable } from './bill.js';
import { GENERATION_USAGE_MESSAGE } from './usage-line.js';
import { signUsageRecord, usageRecordOf } from './usage-record.js';

/**
 * One conditional write: the ledger entry under the generation id and the deduction (idempotent by
 * generation id). Runs after the reply, or for a held request before its reply ends (generation.ts:
 * it releases the hold). Its full record is logged first, as one line (`generation usage`, the
 * generation's only line when it settles), signed (`signature`, HMAC-SHA256 over the record's text with
 * the usage-signing key: only a signed line is billed from the log), and a held request keeps it on
 * its hold too: should the function die before the write, the sweeper settles the hold from it once
 * it expires.
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
  const recordText = JSON.stringify(record);
  const signature = await signatureOf(recordText, entry.generationId);
  // The generation's one log line when all goes well (a settled generation writes nothing more, no
  // metrics line either: the ledger is its record). Latency is the reply's: the settlement follows it.
  logger.info(GENERATION_USAGE_MESSAGE, {
    record,
    ...(signature !== undefined ? { signature } : {}),
    billedUsd: nanoToUsd(billedNano),
    // The BilledMicroUsd metric's value (a statistic, not money: the ledger is the record), read from
    // this line with the tokens by the stack's metric filters (lib/infra/generation-metrics.ts).
    billedMicroUsd: Number(billedNano / 1000n),
    latencyMs: Date.now() - deadlines.startedAt,
  });
  // The hold already stands for this generation: with its record on it, a function that dies now
  // still leaves the sweeper all it needs. The settlement goes on without it (the log line is the
  // fallback), but a failed write is an alarm, never silent: every held request would be exposed.
  if (hold)
    await store
      .recordUsageOnHold(hold, recordText)
      .catch((error: unknown) => recordUsageRecordFailure(entry.generationId, error));
  const deadline = deadlines.settleCallBy();
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
 * The most a settlement waits for the usage-signing key: read from Secrets Manager at an instance's
 * first settlement, then cached (functions/adapters/secrets.ts), so only that one can wait.
 */
const SIGNING_KEY_WAIT_MS = 2_000;

/**
 * The signature of the usage line (usage-record.ts), or undefined when the key is not configured or
 * could not be read in time: the line is logged unsigned then, and the settlement goes on. Logged as
 * an error, since an unsigned line is not billed from the log: should this function die before its
 * settlement, only the record on its hold (a held request) or an operator can bill it.
 */
async function signatureOf(recordText: string, generationId: string): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const key = await Promise.race([
      usageSigningKey(),
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), SIGNING_KEY_WAIT_MS);
      }),
    ]);
    if (key !== undefined) return signUsageRecord(recordText, key);
    logger.error('usage line not signed: no usage-signing key (not configured, or not read in time)', {
      generationId,
    });
  } catch (error) {
    logger.error('usage line not signed: the usage-signing key could not be read', {
      generationId,
      error: error instanceof Error ? error : String(error),
    });
  } finally {
    clearTimeout(timer);
  }
  return undefined;
}
