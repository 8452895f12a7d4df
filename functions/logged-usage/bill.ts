/**
 * Bills, without an operator, a generation whose function died between its reply and its settlement
 * write (an OOM, a crash, a runtime kill): its `generation usage` line, which the function logs before
 * that write, is delivered here by CloudWatch Logs. For each usage record of a batch: one eventually
 * consistent read of the ledger entries (nearly all were settled by their function), then the
 * settlement of those with none through the store's settle path, idempotent by generation id, a held
 * generation's hold released with it (as `admin bill-logged` does, lib/admin/usage-records.ts).
 *
 * Only a signed record is billed, and only up to what its generation could have cost
 * (functions/billing/usage-lines.ts): anyone who can write to the log group can write a line that
 * looks like one. A refused line whose generation is on the ledger bills nothing either way (a line
 * an earlier version logged unsigned, a replay); one whose generation is not is counted and logged.
 *
 * A record that cannot be read is counted and logged, and the rest of the batch goes on; an account
 * that does not exist is logged and left. Any database failure throws: the invocation
 * fails and Lambda retries the batch (the read finds what was billed before the failure).
 */

import { usageVerifyingKeys } from '../adapters/secrets.js';
import {
  readUsageLines,
  signedWithAnotherKey,
  type UsageLineChecks,
  usageTiersFromEnv,
} from '../billing/usage-lines.js';
import { nanoToUsd } from '../core/money.js';
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
  /**
   * Usage lines read but not billed, their generation not on the ledger: unsigned, signed with
   * another key, or billing more than their generation could have cost (usage-lines.ts `refusalOf`).
   */
  refused: number;
  /** Records whose account no longer exists. */
  unbillable: string[];
}

export interface BillOptions {
  /** What each line is checked against (default: the function's key and tiers, `checksFor`). */
  checks?: UsageLineChecks;
  settlementWindowMs?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

let tiers: UsageLineChecks['tiers'] | undefined;

/**
 * The key and the tiers this batch's lines are checked against. Without either, no line can be told
 * genuine: the invocation fails (and is retried, then kept in the dead-letter queue), never counting
 * a genuine line as refused (a failure to read the key likewise). The keys are read from Secrets
 * Manager at the first invocation and every 5 minutes after (functions/adapters/secrets.ts), the
 * tiers once (TIERS_CONFIG, as the completions function has them).
 */
async function checksFor(batch: LogBatch, env: NodeJS.ProcessEnv = process.env): Promise<UsageLineChecks> {
  tiers ??= usageTiersFromEnv(env);
  if (!tiers) throw new Error('no tier configuration: set TIERS_CONFIG (or UPSTREAM_BASE_URL locally)');
  let keys = await usageVerifyingKeys(env);
  // A line signed with none of the keys held: the secret may have been rotated since they were read.
  // Read again before such a line is refused, so that a genuine line is never lost to a rotation.
  const messages = batch.logEvents.map((e) => e.message);
  if (signedWithAnotherKey(messages, keys)) keys = await usageVerifyingKeys(env, { fresh: true });
  if (keys.length === 0)
    throw new Error('no usage-signing key: set USAGE_SIGNING_SECRET_ARN (or USAGE_SIGNING_KEY locally)');
  return { keys, tiers };
}

export async function billLoggedUsage(
  store: LoggedUsageStore,
  batch: LogBatch,
  options: BillOptions = {},
): Promise<LoggedUsageResult> {
  const { settlementWindowMs = SETTLEMENT_WINDOW_MS, now = Date.now } = options;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const result: LoggedUsageResult = {
    billed: [],
    alreadySettled: [],
    unreadable: 0,
    refused: 0,
    unbillable: [],
  };
  if (batch.logEvents.length === 0) return result;
  const checks = options.checks ?? (await checksFor(batch));
  // Each generation once (a billable line over a refused one for it), with its line's time and id.
  const { records, unreadable } = readUsageLines(batch.logEvents, checks);
  for (const { id } of unreadable) {
    result.unreadable += 1;
    logger.error('usage line not readable: not billed', { logStream: batch.logStream, eventId: id });
  }
  if (records.length === 0) return result;

  const settled = await store.settledAmong(records.map((r) => r.entry));
  let open = records.filter((r) => !settled.has(r.entry.generationId));
  result.alreadySettled.push(...settled);
  const wait =
    open.length > 0 ? Math.max(...open.map((r) => r.line.timestamp)) + settlementWindowMs - now() : 0;
  if (wait > 0) {
    // Its function may still be settling it: read again once it cannot be.
    await sleep(wait);
    const late = await store.settledAmong(open.map((r) => r.entry));
    open = open.filter((r) => !late.has(r.entry.generationId));
    result.alreadySettled.push(...late);
  }
  for (const { entry, hold, refused, line } of open) {
    if (refused !== undefined) {
      // Not its function's line, or not as its function wrote it: nothing is charged for it.
      result.refused += 1;
      logger.error('usage line refused: not billed', {
        reason: refused,
        accountId: entry.accountId,
        generationId: entry.generationId,
        billedUsd: nanoToUsd(entry.billedNano),
        logStream: batch.logStream,
        eventId: line.id,
      });
      continue;
    }
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
