import type { TokenUsage } from './pricing.js';

/**
 * Reads an upstream's `usage` object, whatever provider sent it. Returns undefined when it carries
 * no token counts. Numbers must be non-negative integers; anything else is treated as absent.
 */
export function readUpstreamUsage(raw: unknown, rawText?: string): TokenUsage | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const usage = raw as Record<string, unknown>;
  const prompt = count(usage.prompt_tokens);
  const completion = count(usage.completion_tokens);
  if (prompt === undefined || completion === undefined) return undefined;
  const details = usage.prompt_tokens_details as Record<string, unknown> | null | undefined;
  const cached = count(details?.cached_tokens) ?? 0;
  const result: TokenUsage = {
    promptTokens: prompt,
    completionTokens: completion,
    cachedTokens: Math.min(cached, prompt),
  };
  const cost = reportedCost(usage.cost, rawText);
  if (cost !== undefined) result.reportedCostUsd = cost;
  return result;
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

/**
 * The upstream's own cost as decimal text. When the raw JSON text is at hand, the number's exact
 * source digits are taken from it; otherwise the shortest round-trip form of the parsed number.
 */
function reportedCost(value: unknown, rawText: string | undefined): string | undefined {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) return undefined;
  const source = rawText ? /"cost"\s*:\s*([0-9.eE+-]+)/.exec(rawText)?.[1] : undefined;
  return source ?? String(value);
}

/** OpenAI's usage block as the client receives it, with the billed cost as exact decimal text. */
export function usageForClient(usage: TokenUsage, billedUsd: string) {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedTokens },
    cost: new JsonDecimal(billedUsd),
  };
}

/** A decimal that serialises as a bare JSON number with exactly its digits (no float in between). */
export class JsonDecimal {
  constructor(readonly text: string) {}
}

const MARK = '\u0000decimal:';
/** JSON.stringify that writes JsonDecimal values as bare numbers with their exact digits. */
export function stringifyJson(value: unknown): string {
  const json = JSON.stringify(value, (_key, v) => (v instanceof JsonDecimal ? `${MARK}${v.text}` : v));
  return json.replace(/"\\u0000decimal:(-?[0-9.]+)"/g, '$1');
}
