import { billedNanoFromUpstreamCost, usdToCost } from '../core/money.js';
import type { PriceTable, UpstreamTarget } from '../core/tiers.js';
import type { TokenUsage } from '../core/usage.js';

export type { TokenUsage } from '../core/usage.js';
export type { PriceTable };

export interface Charge {
  /** In units of 1e-21 USD (money.ts). */
  upstreamCost: bigint;
  billedNano: bigint;
}

/**
 * The upstream cost: the upstream's own figure where the target reports one, else the price table
 * (uncached input, cached input, output). Then the single markup rule of money.ts.
 */
export function priceUsage(
  usage: TokenUsage,
  target: Pick<UpstreamTarget, 'prices' | 'reportsCost'>,
): Charge {
  let upstreamCost: bigint;
  if (target.reportsCost && usage.reportedCostUsd !== undefined) {
    upstreamCost = usdToCost(usage.reportedCostUsd);
  } else {
    upstreamCost = tableCost(usage, target.prices);
  }
  if (upstreamCost < 0n) upstreamCost = 0n;
  return { upstreamCost, billedNano: billedNanoFromUpstreamCost(upstreamCost) };
}

/**
 * The cost of a usage at a price table: cached input at the cached rate, cache writes at the write rate
 * where the table has one (else the input rate), the rest of the input at the input rate, output at the
 * output rate. femto-USD per million tokens x tokens = 1e-21 USD units, exactly.
 */
export function tableCost(usage: TokenUsage, prices: PriceTable): bigint {
  const prompt = BigInt(usage.promptTokens);
  const cached = minBig(BigInt(usage.cachedTokens), prompt);
  const written = minBig(BigInt(usage.cacheWriteTokens ?? 0), prompt - cached);
  const uncached = prompt - cached - written;
  return (
    uncached * prices.input +
    cached * prices.cachedInput +
    written * (prices.cacheWrite ?? prices.input) +
    BigInt(usage.completionTokens) * prices.output
  );
}

const minBig = (a: bigint, b: bigint) => (a < b ? a : b);
