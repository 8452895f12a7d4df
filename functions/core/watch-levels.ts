/**
 * The balance levels below which the balance watch may act on an account, copied onto its account
 * item and every slice item (the DynamoDB adapter, watch-copy.ts) whenever its settings change, so
 * that the accounts table's stream can be filtered on them and the watch invoked only where a balance
 * is below one (functions/balance-watch/stream.ts):
 *
 * - `watchAlertNano`: the low-balance alert's threshold; `watchTopUpNano`: auto top-up's "when below",
 *   while it is switched on (a card saved or not: the webhook saves it later, and copies nothing);
 * - `watchNano`: the higher of the two, the one level the filter compares with;
 * - `watchMargin`: the item's `creditBalance` less `watchNano`, set with the copy and then moved by every
 *   write that moves the balance (an ADD of the same amount), so that "below" is its sign, which a
 *   stream filter can test (a filter compares an attribute with constants only, never with another).
 *
 * Each slice carries the account's whole levels: while no slice is below zero, a total below a level
 * means every slice is below it, so the slice a crossing write touched is below it too. A slice below
 * while the total is not is a false alarm the watch reads and drops; a crossing the filter misses (a
 * slice below zero, an operator's forced deduction) is the safety sweep's.
 */
import type { Watch } from './watch.js';

/** Nano-USD per cent (1 USD = 10^9 nano-USD). */
const NANO_PER_CENT = 10_000_000n;

export interface WatchLevels {
  alertNano?: bigint;
  topUpNano?: bigint;
}

/** The levels a watch's settings set: none when it has no alert and auto top-up is off. */
export function watchLevels(watch: Watch | undefined): WatchLevels {
  const levels: WatchLevels = {};
  if (watch?.thresholdCents !== undefined) levels.alertNano = BigInt(watch.thresholdCents) * NANO_PER_CENT;
  if (watch?.autoTopUp?.enabled) levels.topUpNano = BigInt(watch.autoTopUp.belowCents) * NANO_PER_CENT;
  return levels;
}

/** The higher level (`watchNano`), or undefined when there is none. */
export function topLevel(levels: WatchLevels): bigint | undefined {
  const { alertNano, topUpNano } = levels;
  if (alertNano === undefined) return topUpNano;
  if (topUpNano === undefined) return alertNano;
  // bigint: no Math.max
  if (alertNano >= topUpNano) return alertNano;
  return topUpNano;
}
