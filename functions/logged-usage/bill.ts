/**
 * Bills, without an operator, a generation whose function died between its reply and its settlement
 * write (an OOM, a crash, a runtime kill): its `generation usage` line, which the function logs before
 * that write, is delivered here by CloudWatch Logs. For each usage record of a batch: one eventually
 * consistent read of the ledger entries (nearly all were settled by their function), then the
 * settlement of those with none through the store's settle path, idempotent by generation id, a held
 * generation's hold released with it (as `admin bill-logged` does, lib/admin/usage-records.ts).
 *
 * A record that cannot be read is counted and logged, and the rest of the batch goes on; an account
 * that does not exist is logged and left. Any database failure throws: the invocation
 * fails and Lambda retries the batch (the read finds what was billed before the failure).
 */
import { nanoToUsd } from '../billing/money.js';
import { type LoggedGeneration, readUsageLine } from '../billing/usage-lines.js';
import { AccountNotFoundError, type ChargeEntry, type Store } from '../core/store.js';
import { logger } from '../shared/observability.js';
import type { LogBatch } from './subscription-event.js';

/**
 * How long after its line a live function may still be settling (or deferring) its generation: its
 * settlement's deadline is at most the settlement reserve after it (SETTLE_RESERVE_MS, 10 s by default,
 * functions/completions/deadlines.ts). A record with no ledger entry younger than this is read again
 * once this has passed before it is settled here, so that a slow settlement is not raced.
 */
const SETTLEMENT_WINDOW_MS = 10_000;

export interface LoggedUsageStore extends Pick<Store, 'settleCharge'> {
  /** The generation ids among these that have a ledger entry (adapters/dynamodb/ledger.ts). */
  settledAmong(entries: readonly ChargeEntry[]): Promise<Set<string>>;
}

export interface LoggedUsageResult {
  /**
   * Settled here: this invocation's own write created the ledger entry (the store answers 'settled'
   * to that call alone). Each is a generation whose function did not settle it; one that another
   * writer billed between the read and this write (the sweeper, another delivery of the same line)
   * is among `alreadySettled`, not here.
   */
  billed: string[];
  /** Already on the ledger (nearly all): nothing written. */
  alreadySettled: string[];
  /** Usage lines whose record could not be read. */
  unreadable: number;
  /** Records whose account no longer exists. */
  unbillable: string[];
}

export interface BillOptions {
  settlementWindowMs?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

export async function billLoggedUsage(
  store: LoggedUsageStore,
  batch: LogBatch,
  options: BillOptions = {},
): Promise<LoggedUsageResult> {
  const { settlementWindowMs = SETTLEMENT_WINDOW_MS, now = Date.now } = options;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const result: LoggedUsageResult = { billed: [], alreadySettled: [], unreadable: 0, unbillable: [] };
  // Each generation once, with the time of its line.
  const records = new Map<string, LoggedGeneration & { loggedAt: number }>();
  for (const { id, timestamp, message } of batch.logEvents) {
    const read = readUsageLine(message);
    if (read?.kind === 'record')
      records.set(read.generation.entry.generationId, { ...read.generation, loggedAt: timestamp });
    else if (read?.kind === 'unreadable') {
      result.unreadable += 1;
      logger.error('usage line not readable: not billed', { logStream: batch.logStream, eventId: id });
    }
  }
  if (records.size === 0) return result;

  const settled = await store.settledAmong([...records.values()].map((r) => r.entry));
  let open = [...records.values()].filter((r) => !settled.has(r.entry.generationId));
  result.alreadySettled.push(...settled);
  const wait = open.length > 0 ? Math.max(...open.map((r) => r.loggedAt)) + settlementWindowMs - now() : 0;
  if (wait > 0) {
    // Its function may still be settling it: read again once it cannot be.
    await sleep(wait);
    const late = await store.settledAmong(open.map((r) => r.entry));
    open = open.filter((r) => !late.has(r.entry.generationId));
    result.alreadySettled.push(...late);
  }
  for (const { entry, hold } of open) {
    try {
      // With its hold, if the sweeper has not released it (settleCharge settles without it if so).
      const outcome = await store.settleCharge(entry, hold ? { hold } : {});
      if (outcome === 'already-settled') {
        result.alreadySettled.push(entry.generationId);
        continue;
      }
      result.billed.push(entry.generationId);
      logger.warn('logged generation billed: its function did not settle it', {
        accountId: entry.accountId,
        generationId: entry.generationId,
        billedUsd: nanoToUsd(entry.billedNano),
        logStream: batch.logStream,
      });
    } catch (error) {
      if (!(error instanceof AccountNotFoundError)) throw error;
      // No account item to charge (accounts are not deleted: a record naming none is not one of ours).
      // Sent again it would fail the same way: logged for the operator, the batch goes on.
      result.unbillable.push(entry.generationId);
      logger.error('logged generation not billed: its account does not exist', {
        accountId: entry.accountId,
        generationId: entry.generationId,
        billedUsd: nanoToUsd(entry.billedNano),
      });
    }
  }
  return result;
}
