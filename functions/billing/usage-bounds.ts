/**
 * Bounds on a reported usage, from what the gateway knows itself (nothing from the upstream is
 * trusted). A usage is never billed beyond what the request could have used:
 *
 * - completion tokens <= the output cap + CAP_MARGIN (the request's max_completion_tokens / max_tokens,
 *   else the tier's maxOutputTokens), and <= the UTF-8 bytes of the text the upstream actually returned
 *   (content, refusal, tool calls, reasoning text) + TEXT_SLACK + the reported reasoning tokens (themselves
 *   at most the cap). Every token of a byte-level BPE tokenizer decodes to at least one byte, so text can
 *   never hold more tokens than bytes, whatever the provider's tokenizer;
 * - prompt tokens <= the request's prompt bound (promptBound below: bytes of the body plus allowances
 *   for images and files, whose tokens are not in their bytes);
 * - cached and cache-write tokens <= prompt tokens;
 * - a reported cost (OpenRouter's usage.cost) <= COST_FACTOR x the same tokens at the target's price
 *   table + COST_SLACK.
 *
 * A count above its bound is billed AT the bound; a cost above its bound is replaced by the table
 * price. Each adjustment is named in `adjustments` (kept on the ledger entry, logged, counted).
 */

import { COST_SCALE, parseDecimal, usdToCost } from '../core/money.js';
import { type PriceTable, type TokenUsage, tableCost } from './pricing.js';

export const CAP_MARGIN = 16;
export const TEXT_SLACK = 16;
export const COST_FACTOR = 3n;
/** $0.00001 in upstream cost units (1e-21 USD). */
export const COST_SLACK = parseDecimal('0.00001', COST_SCALE);
/** Tokens allowed per image part (OpenAI high detail tops out near 1,500; other providers differ). */
export const IMAGE_TOKENS = 8_192;
/** Tokens allowed per file or audio part referenced by id or URL (its bytes are not in the body). */
const FILE_TOKENS = 131_072;
/** Chat-format overhead per message, and for the request as a whole (system prompts providers add). */
const PER_MESSAGE = 16;
const PER_REQUEST = 1_024;

export interface UsageLimits {
  /** The request's output cap in tokens. */
  outputCap: number;
  /** The most prompt tokens the request can be (promptBound). */
  promptBound: number;
  /** UTF-8 bytes of everything the upstream returned as text. */
  completionTextBytes: number;
}

export interface BoundedUsage {
  usage: TokenUsage;
  /** Empty when the report was within every bound. */
  adjustments: string[];
}

/** The most prompt tokens a request body can be billed for. */
export function promptBound(bodyBytes: number, messages: readonly { content?: unknown }[]): number {
  let bound = bodyBytes + PER_REQUEST + PER_MESSAGE * messages.length;
  for (const message of messages) {
    if (!Array.isArray(message.content)) continue;
    for (const part of message.content as { type?: unknown }[]) {
      if (part?.type === 'image_url') bound += IMAGE_TOKENS;
      else if (part?.type === 'file' || part?.type === 'input_audio') bound += FILE_TOKENS;
    }
  }
  return bound;
}

/** The most completion tokens a reply of these text bytes and reported reasoning tokens can be. */
export function completionBound(
  limits: Pick<UsageLimits, 'outputCap' | 'completionTextBytes'>,
  reasoning = 0,
) {
  const capBound = limits.outputCap + CAP_MARGIN;
  return Math.min(capBound, limits.completionTextBytes + TEXT_SLACK + Math.min(reasoning, capBound));
}

export function boundUsage(usage: TokenUsage, limits: UsageLimits, prices: PriceTable): BoundedUsage {
  const adjustments: string[] = [];
  const out: TokenUsage = { ...usage };

  if (out.reasoningTokens !== undefined && out.reasoningTokens > out.completionTokens) {
    adjustments.push(`reasoning_tokens ${out.reasoningTokens} > completion_tokens ${out.completionTokens}`);
    out.reasoningTokens = out.completionTokens;
  }
  const maxCompletion = completionBound(limits, out.reasoningTokens ?? 0);
  if (out.completionTokens > maxCompletion) {
    adjustments.push(`completion_tokens ${out.completionTokens} > bound ${maxCompletion}`);
    out.completionTokens = maxCompletion;
    if (out.reasoningTokens !== undefined) out.reasoningTokens = Math.min(out.reasoningTokens, maxCompletion);
  }
  if (out.promptTokens > limits.promptBound) {
    adjustments.push(`prompt_tokens ${out.promptTokens} > bound ${limits.promptBound}`);
    out.promptTokens = limits.promptBound;
  }
  if (out.cachedTokens > out.promptTokens) {
    adjustments.push(`cached_tokens ${out.cachedTokens} > prompt_tokens ${out.promptTokens}`);
    out.cachedTokens = out.promptTokens;
  }
  if (out.cacheWriteTokens !== undefined && out.cacheWriteTokens > out.promptTokens - out.cachedTokens) {
    adjustments.push(`cache_write_tokens ${out.cacheWriteTokens} > uncached prompt tokens`);
    out.cacheWriteTokens = out.promptTokens - out.cachedTokens;
  }
  if (out.reportedCostUsd !== undefined) {
    const reported = usdToCost(out.reportedCostUsd);
    const bound = tableCost(out, prices) * COST_FACTOR + COST_SLACK;
    if (reported > bound) {
      adjustments.push(`cost ${out.reportedCostUsd} > ${COST_FACTOR}x the price table`);
      delete out.reportedCostUsd;
    }
  }
  if (adjustments.length > 0) {
    // The client's details must agree with the billed counts.
    if (out.promptDetails) out.promptDetails = { ...out.promptDetails, cached_tokens: out.cachedTokens };
    if (out.completionDetails && out.reasoningTokens !== undefined)
      out.completionDetails = { ...out.completionDetails, reasoning_tokens: out.reasoningTokens };
  }
  return { usage: out, adjustments };
}
