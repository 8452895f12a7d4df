/**
 * Holds: prepaid means prepaid. A request's worst case is the most it can be billed: every
 * usage is held to its bounds before pricing (usage-bounds.ts), so pricing those bounds at the tier's
 * most expensive target gives a ceiling no bill of this request can pass.
 *
 * Admission: available credit = balance - held. With no available credit: 402. A request needs a hold
 * when the account could otherwise overdraw: when available < (requests that can run at once) x worst
 * case. A hold is placed by one conditional write (available > 0 before it) and released by the
 * settlement transaction. A request admitted without a hold writes nothing before its settlement, so
 * holds placed after it do not count it and may spend the credit it was admitted on. The overdraft
 * bound is therefore: one request's bill plus the bills of the requests that were unbilled without a
 * live hold when it was admitted (fast-path ones still running: at most maxConcurrency - 1, each
 * admitted on maxConcurrency x its worst case; and any whose function ended unbilled). Why: with
 * E = balance - held - the worst cases of those unheld unbilled requests, only an admission lowers E
 * (a held one to above minus those worst cases and its own, a fast one to at least minus theirs), and
 * every bill raises it by its worst case minus its bill.
 */

import { billedNanoFromUpstreamCost } from '../core/money.js';
import type { UpstreamTarget } from '../core/tiers.js';
import { tableCost } from './pricing.js';
import { CAP_MARGIN, COST_FACTOR, COST_SLACK } from './usage-bounds.js';

/** The most this request can be billed, in nano-USD, whichever of the tier's targets answers. */
export function worstCaseBilledNano(
  promptBoundTokens: number,
  outputCap: number,
  targets: readonly Pick<UpstreamTarget, 'prices' | 'reportsCost'>[],
): bigint {
  let worst = 0n;
  for (const target of targets) {
    const { input, cacheWrite } = target.prices;
    const dearestInput = cacheWrite !== undefined && cacheWrite > input ? cacheWrite : input;
    let cost = tableCost(
      { promptTokens: promptBoundTokens, completionTokens: outputCap + CAP_MARGIN, cachedTokens: 0 },
      { ...target.prices, input: dearestInput },
    );
    if (target.reportsCost) cost = cost * COST_FACTOR + COST_SLACK;
    if (cost > worst) worst = cost;
  }
  return billedNanoFromUpstreamCost(worst);
}

/**
 * True when the account's available credit does not cover `maxConcurrency` requests like this one.
 * Credit marked to move to another slice (outgoing, core/store.ts Transfer) is left out: a request
 * admitted without a hold now may bill after the credit has moved, and the slice it moved to spends
 * it too. A held request may use it (its hold is counted when the transfer moves what is left).
 */
export function needsHold(
  account: { balanceNano: bigint; heldNano: bigint; outgoingNano?: bigint },
  worstCaseNano: bigint,
  maxConcurrency: number,
): boolean {
  const unmarked = account.balanceNano - account.heldNano - (account.outgoingNano ?? 0n);
  return unmarked < BigInt(maxConcurrency) * worstCaseNano;
}
