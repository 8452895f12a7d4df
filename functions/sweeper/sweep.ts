/**
 * Releases expired holds. A hold outlives its request only when the function died, timed out or could
 * not settle: its request was never billed, so each release is logged (with the hold) and counted in the
 * `ExpiredHoldsReleased` metric for the operator to look at. A hold whose settlement failed carries
 * the generation's usage record: its release logs that record again as a `generation usage` line,
 * which `admin bill-logged` bills. A release is one conditional transaction (the hold item must
 * still exist and be expired), so a hold is never released twice and never after its settlement.
 */

import { nanoToUsd } from '../core/money.js';
import type { Hold, Store } from '../core/store.js';
import { logger, recordExpiredHoldReleased } from '../shared/observability.js';
import { GENERATION_USAGE_MESSAGE } from '../shared/usage-line.js';

export interface SweepResult {
  examined: number;
  released: number;
}

export async function sweepExpiredHolds(store: Store, now = Date.now()): Promise<SweepResult> {
  const holds = await store.listHolds();
  let released = 0;
  for (const hold of holds) {
    if (hold.expiresAt > now) continue;
    if (await store.releaseHold(hold, { onlyIfExpiredAt: now })) {
      released += 1;
      recordExpiredHoldReleased();
      logger.warn('expired hold released: its request was never billed', {
        accountId: hold.accountId,
        generationId: hold.holdId,
        heldUsd: nanoToUsd(hold.amountNano),
        createdAt: hold.createdAt,
        expiresAt: new Date(hold.expiresAt).toISOString(),
      });
      const record = usageRecordOf(hold);
      if (record !== undefined) logger.warn(GENERATION_USAGE_MESSAGE, { record, source: 'expired hold' });
    }
  }
  return { examined: holds.length, released };
}

/** The usage record a failed settlement left on its hold, as it was logged; undefined without one. */
function usageRecordOf(hold: Hold): unknown {
  if (hold.usageRecord === undefined) return undefined;
  try {
    return JSON.parse(hold.usageRecord);
  } catch {
    // Written by the completions function as JSON; logged as it is if it somehow is not.
    return hold.usageRecord;
  }
}
