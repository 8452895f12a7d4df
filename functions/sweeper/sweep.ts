/**
 * Completes deferred settlements, releases expired holds and moves due transfers between slices.
 *
 * A hold item carrying a usage record is a generation the function did not finish billing: deferred
 * (the function gave up on its settlement within its time and said so), or expired with the record
 * its held request wrote before settling (the function died). The sweeper settles it from the record:
 * the ledger entry and the deduction in one transaction, releasing the hold, keyed by the generation
 * id, so a generation is billed once however many sweeps, late commits or `admin bill-logged` runs
 * meet on it. A deferred one is completed at the next sweep; an undeferred one only once expired
 * (its function may still be settling it until then).
 *
 * An expired hold without a record outlives a request that was never billed (the function died, timed
 * out or could not settle before it priced anything, or a fast-path record that was only logged): it
 * is released, logged and counted (`ExpiredHoldsReleased`) for the operator to look at. A release is
 * one conditional transaction (the hold item must still exist and be expired), so a hold is never
 * released twice and never after its settlement.
 */

import { GENERATION_USAGE_MESSAGE } from '../billing/usage-line.js';
import { readUsageRecord } from '../billing/usage-record.js';
import { nanoToUsd } from '../core/money.js';
import { type ChargeEntry, type Hold, type Store, utcDay } from '../core/store.js';
import {
  logger,
  recordDeferredSettlementCompleted,
  recordExpiredHoldReleased,
} from '../shared/observability.js';

export interface SweepResult {
  examined: number;
  released: number;
  /** Settlements completed from a hold's usage record. */
  completed: number;
}

/** One run of the sweeper: the holds, then the transfers between slices that are due. */
export async function sweep(store: Store, now = Date.now()): Promise<SweepResult & { transferred: number }> {
  const holds = await sweepExpiredHolds(store, now);
  return { ...holds, transferred: await moveDueTransfers(store, now) };
}

/**
 * Moves every transfer between two slices that is due (core/store.ts, Transfer): each in its own
 * transaction, which moves what the source still has of it and deletes the item, so a transfer moves
 * once however many sweeps meet on it. A failure is logged and left for the next sweep. Returns how
 * many moved.
 */
export async function moveDueTransfers(store: Store, now = Date.now()): Promise<number> {
  let moved = 0;
  for (const transfer of await store.listTransfers()) {
    if (transfer.dueAt > now) continue;
    try {
      const outcome = await store.completeTransfer(transfer, now);
      if (typeof outcome !== 'object') continue;
      moved += 1;
      logger.info('transfer between slices moved', {
        accountId: transfer.accountId,
        from: transfer.from,
        to: transfer.to,
        scheduledUsd: nanoToUsd(transfer.amountNano),
        movedUsd: nanoToUsd(outcome.moved),
      });
    } catch (error) {
      logger.error('transfer between slices not moved; the next sweep tries again', {
        accountId: transfer.accountId,
        transferId: transfer.transferId,
        error: error instanceof Error ? error : String(error),
      });
    }
  }
  return moved;
}

/**
 * Activity's roll-up (adapters/dynamodb/activity.ts): every slice item's counters of a UTC day before
 * today's moved, once each, into the account's day items. Run with the balance check (every 15
 * minutes, a scan of the accounts table already); a failure is logged and the next run tries again.
 */
export async function rollUpActivity(
  store: { rollUpActivity?: (today: string) => Promise<number> },
  now = Date.now(),
): Promise<number> {
  if (!store.rollUpActivity) return 0;
  try {
    return await store.rollUpActivity(utcDay(new Date(now).toISOString()));
  } catch (error) {
    logger.error('activity roll-up stopped; the next run tries again', {
      error: error instanceof Error ? error : String(error),
    });
    return 0;
  }
}

export async function sweepExpiredHolds(store: Store, now = Date.now()): Promise<SweepResult> {
  const holds = await store.listHolds();
  let released = 0;
  let completed = 0;
  for (const hold of holds) {
    const expired = hold.expiresAt <= now;
    if (!expired && !hold.deferred) continue;
    const read = hold.usageRecord === undefined ? undefined : readUsageRecord(parseJson(hold.usageRecord));
    // Only the hold's own generation: a record that names another is left to the operator.
    if (read && read.entry.generationId === hold.holdId && read.entry.accountId === hold.accountId) {
      // Billed on the slice its hold is on (the hold item's key says which; the record may predate slices).
      const { slice: _recorded, ...entry } = read.entry;
      if (await complete(store, hold.slice ? { ...entry, slice: hold.slice } : entry, hold)) completed += 1;
      continue;
    }
    if (expired && (await store.releaseHold(hold, { onlyIfExpiredAt: now }))) {
      released += 1;
      recordExpiredHoldReleased();
      logger.warn('expired hold released: its request was never billed', {
        accountId: hold.accountId,
        generationId: hold.holdId,
        heldUsd: nanoToUsd(hold.amountNano),
        createdAt: hold.createdAt,
        expiresAt: new Date(hold.expiresAt).toISOString(),
      });
      // A record that is not one (written by hand?) is logged as it is, for the operator. Unsigned on
      // purpose (the sweeper holds no usage-signing key): it is a record the sweeper would not bill,
      // so `admin bill-logged` refuses it too unless the operator, having checked it, accepts
      // unsigned lines (docs/operations.md).
      if (hold.usageRecord !== undefined)
        logger.warn(GENERATION_USAGE_MESSAGE, {
          record: parseJson(hold.usageRecord),
          source: 'expired hold',
        });
    }
  }
  return { examined: holds.length, released, completed };
}

/**
 * Settles one generation from its hold's record, releasing the hold with it. Already on the ledger
 * (a late commit, or bill-logged first): the item is only released, as a settled generation holds
 * nothing. A failure is logged and left for the next sweep. True if this sweep billed it: the store
 * answers 'settled' only to the call whose own write created the ledger entry, so a generation the
 * logged-usage function (or another sweep) billed after this sweep listed its hold is not counted
 * here too (`DeferredSettlementsCompleted`), even within the ten minutes DynamoDB answers a repeated
 * transaction as a success.
 */
async function complete(store: Store, entry: ChargeEntry, hold: Hold): Promise<boolean> {
  try {
    const outcome = await store.settleCharge(entry, { hold });
    if (outcome === 'already-settled') {
      await store.releaseHold(hold);
      return false;
    }
    recordDeferredSettlementCompleted();
    logger.info('deferred settlement completed', {
      accountId: hold.accountId,
      generationId: hold.holdId,
      billedUsd: nanoToUsd(entry.billedNano),
      deferred: hold.deferred === true,
    });
    return true;
  } catch (error) {
    logger.error('deferred settlement not completed; the next sweep tries again', {
      generationId: hold.holdId,
      error: error instanceof Error ? error : String(error),
    });
    return false;
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
