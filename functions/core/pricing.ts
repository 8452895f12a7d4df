import { billedNanoFromUpstreamFemto, usdToFemto } from './money.js';
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
  upstreamFemto: bigint;
  billedNano: bigint;
}

/**
 * The upstream cost: the upstream's own figure where the target reports one, else the price table
 * (uncached input, cached input, output). Then the single markup rule of money.ts.
 */
export function priceUsage(usage: TokenUsage, target: Pick<UpstreamTarget, 'prices' | 'reportsCost'>): Charge {
  let upstreamFemto: bigint;
  if (target.reportsCost && usage.reportedCostUsd !== undefined) {
    upstreamFemto = usdToFemto(usage.reportedCostUsd);
  } else {
    const cached = BigInt(Math.min(usage.cachedTokens, usage.promptTokens));
    const uncached = BigInt(usage.promptTokens) - cached;
    const { input, cachedInput, output } = target.prices;
    // nano-USD per million tokens x tokens = femto-USD, exactly.
    upstreamFemto = uncached * input + cached * cachedInput + BigInt(usage.completionTokens) * output;
  }
  if (upstreamFemto < 0n) upstreamFemto = 0n;
  return { upstreamFemto, billedNano: billedNanoFromUpstreamFemto(upstreamFemto) };
}
