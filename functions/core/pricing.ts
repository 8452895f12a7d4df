import { billedNanoFromUpstreamCost, usdToCost } from './money.js';
import type { UpstreamTarget } from './tiers.js';

/** Token usage as an OpenAI-compatible upstream reports it. */
export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  /** The upstream's own cost in USD (OpenRouter's `usage.cost`), as its decimal text. */
  reportedCostUsd?: string;
}

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
    const cached = BigInt(Math.min(usage.cachedTokens, usage.promptTokens));
    const uncached = BigInt(usage.promptTokens) - cached;
    const { input, cachedInput, output } = target.prices;
    // femto-USD per million tokens x tokens = 1e-21 USD units, exactly.
    upstreamCost = uncached * input + cached * cachedInput + BigInt(usage.completionTokens) * output;
  }
  if (upstreamCost < 0n) upstreamCost = 0n;
  return { upstreamCost, billedNano: billedNanoFromUpstreamCost(upstreamCost) };
}
