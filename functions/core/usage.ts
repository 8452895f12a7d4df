/**
 * Reads an upstream's `usage` object, whatever provider sent it, and turns a billed usage back into
 * OpenAI's usage block for the client. An upstream's usage is untrusted input: a report whose counts
 * are not non-negative integers is kept as `invalid` (never billed as sent); usage-bounds.ts then
 * checks a valid one against what the request could have used.
 */
import type { TokenUsage } from './pricing.js';

/** What the upstream said about usage: a readable report, or why it was unusable. */
export type UsageReport = { usage: TokenUsage; raw: unknown } | { invalid: string; raw: unknown };

/** Detail fields passed through to the client: at most this many numeric entries per details object. */
const MAX_DETAIL_FIELDS = 16;

/**
 * The usage of an upstream body or chunk. Undefined when it carries no usage at all (`usage` absent or
 * null); `invalid` when it carries one whose counts cannot be billed (negative, fractional, not numbers).
 */
export function readUpstreamUsage(raw: unknown, rawText?: string): UsageReport | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== 'object' || Array.isArray(raw)) return { invalid: 'usage is not an object', raw };
  const usage = raw as Record<string, unknown>;
  const prompt = count(usage.prompt_tokens);
  const completion = count(usage.completion_tokens);
  if (prompt === undefined || completion === undefined)
    return { invalid: 'prompt_tokens or completion_tokens is not a non-negative integer', raw };
  const promptDetails = numericDetails(usage.prompt_tokens_details);
  const completionDetails = numericDetails(usage.completion_tokens_details);
  const rawCached = (usage.prompt_tokens_details as Record<string, unknown> | null | undefined)
    ?.cached_tokens;
  const cached = count(rawCached);
  if (rawCached !== undefined && rawCached !== null && cached === undefined)
    return { invalid: 'prompt_tokens_details.cached_tokens is not a non-negative integer', raw };
  const result: TokenUsage = {
    promptTokens: prompt,
    completionTokens: completion,
    cachedTokens: cached ?? 0,
  };
  // Cache writes: OpenRouter's `cache_write_tokens`, Anthropic's `cache_creation_input_tokens`.
  const cacheWrite = count(promptDetails?.cache_write_tokens) ?? count(usage.cache_creation_input_tokens);
  if (cacheWrite !== undefined && cacheWrite > 0) result.cacheWriteTokens = cacheWrite;
  const reasoning = count(completionDetails?.reasoning_tokens);
  if (reasoning !== undefined) result.reasoningTokens = reasoning;
  if (promptDetails) result.promptDetails = promptDetails;
  if (completionDetails) result.completionDetails = completionDetails;
  const cost = reportedCost(usage.cost, rawText);
  if (cost !== undefined) result.reportedCostUsd = cost;
  return { usage: result, raw };
}

const DECIMAL_TEXT = /^\d+(\.\d+)?([eE][+-]?\d+)?$/;

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

/** The numeric, non-negative entries of a `*_tokens_details` object (bounded in number). */
function numericDetails(value: unknown): Record<string, number> | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const out: Record<string, number> = {};
  let fields = 0;
  for (const [name, entry] of Object.entries(value)) {
    if (fields >= MAX_DETAIL_FIELDS) break;
    if (
      typeof entry === 'number' &&
      Number.isSafeInteger(entry) &&
      entry >= 0 &&
      /^[a-z_]{1,64}$/.test(name)
    ) {
      out[name] = entry;
      fields += 1;
    }
  }
  return fields > 0 ? out : undefined;
}

/**
 * The upstream's own cost as decimal text. When the raw JSON text is at hand, the number's exact
 * source digits are taken from it; otherwise the shortest round-trip form of the parsed number.
 */
function reportedCost(value: unknown, rawText: string | undefined): string | undefined {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) return undefined;
  const source = rawText ? /"cost"\s*:\s*([0-9.eE+-]+)/.exec(rawText)?.[1] : undefined;
  if (source !== undefined && DECIMAL_TEXT.test(source)) return source;
  return String(value);
}

/**
 * OpenAI's usage block as the client receives it, with the billed cost as exact decimal text. The
 * upstream's details (cached, reasoning, audio tokens...) pass through, with the billed counts.
 */
export function usageForClient(usage: TokenUsage, billedUsd: string) {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    prompt_tokens_details: {
      ...usage.promptDetails,
      cached_tokens: usage.cachedTokens,
      ...(usage.cacheWriteTokens !== undefined ? { cache_write_tokens: usage.cacheWriteTokens } : {}),
    },
    ...(usage.completionDetails || usage.reasoningTokens !== undefined
      ? {
          completion_tokens_details: {
            ...usage.completionDetails,
            ...(usage.reasoningTokens !== undefined ? { reasoning_tokens: usage.reasoningTokens } : {}),
          },
        }
      : {}),
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
