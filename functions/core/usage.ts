/**
 * Reads an upstream's `usage` object, whatever provider sent it, and turns a billed usage back into
 * OpenAI's usage block for the client. An upstream's usage is untrusted input: every number in it is
 * read with bounded digits and exponent, in bounded time. A report whose counts are not non-negative
 * integers within bounds is kept as `invalid` (never billed as sent); a cost outside its bounds is
 * dropped with a note (priced by the table instead); usage-bounds.ts then checks a valid report
 * against what the request could have used.
 */
import { parse as parseLossless } from 'lossless-json';
import type { CompletionUsage } from 'openai/resources/completions';

/** What the upstream said about usage: a readable report (with notes on what was not), or why it was unusable. */
/** Token usage as an OpenAI-compatible upstream reports it. */
export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  /** Prompt tokens written to the provider's cache (priced at `cacheWrite` where the table has it). */
  cacheWriteTokens?: number;
  /** Reasoning tokens, counted inside completionTokens (OpenAI's `completion_tokens_details`). */
  reasoningTokens?: number;
  /** The upstream's `prompt_tokens_details` / `completion_tokens_details`, numeric entries only. */
  promptDetails?: Record<string, number>;
  completionDetails?: Record<string, number>;
  /** The upstream's own cost in USD (OpenRouter's `usage.cost`), as its decimal text. */
  reportedCostUsd?: string;
}

export type UsageReport =
  | { usage: TokenUsage; raw: unknown; notes: string[] }
  | { invalid: string; raw: unknown };

/** Detail fields passed through to the client: at most this many numeric entries per details object. */
const MAX_DETAIL_FIELDS = 16;

/** A JSON number as its source text, as the lossless parser hands it over (never converted unbounded). */
class NumberText {
  constructor(readonly text: string) {}
}

/** A token count: at most 15 digits, no sign, fraction or exponent. */
const COUNT_TEXT = /^(?:0|[1-9]\d{0,14})$/;
/**
 * A cost in USD: at most 9 integer digits, 30 decimals and a two-digit exponent, no sign. `0e999999999`
 * (zero, as JSON) or a 400-digit number would otherwise cost unbounded time and memory to make exact.
 */
const COST_TEXT = /^(?:0|[1-9]\d{0,8})(?:\.\d{1,30})?(?:[eE][+-]?\d{1,2})?$/;

/**
 * The usage of an upstream body or chunk. `native` is its `usage` as JSON.parse gave it; `sourceText`
 * the whole JSON text it came from. Where a float could hide what was sent (a cost, or a count that is
 * not a positive safe integer: `0e999999999` parses as 0, `-0` as 0), the text is parsed again keeping
 * each number's digits, so the bounds apply to what the upstream wrote. Undefined when it carries no
 * usage at all (absent or null).
 */
export function readUpstreamUsage(native: unknown, sourceText?: string): UsageReport | undefined {
  if (native === undefined || native === null) return undefined;
  if (typeof native !== 'object' || Array.isArray(native))
    return { invalid: 'usage is not an object', raw: native };
  let usage = native as Record<string, unknown>;
  if (sourceText !== undefined && needsSourceDigits(usage)) {
    const exact = usageWithSourceDigits(sourceText);
    if (!exact) return { invalid: 'usage could not be read again with its exact numbers', raw: native };
    usage = exact;
  }
  const prompt = count(usage.prompt_tokens);
  const completion = count(usage.completion_tokens);
  if (prompt === undefined || completion === undefined)
    return {
      invalid: 'prompt_tokens or completion_tokens is not a bounded non-negative integer',
      raw: native,
    };
  const promptDetails = numericDetails(usage.prompt_tokens_details);
  const completionDetails = numericDetails(usage.completion_tokens_details);
  const rawCached = (usage.prompt_tokens_details as Record<string, unknown> | null | undefined)
    ?.cached_tokens;
  const cached = count(rawCached);
  if (rawCached !== undefined && rawCached !== null && cached === undefined)
    return {
      invalid: 'prompt_tokens_details.cached_tokens is not a bounded non-negative integer',
      raw: native,
    };
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
  const notes: string[] = [];
  if (usage.cost !== undefined && usage.cost !== null) {
    const cost = costText(usage.cost);
    if (cost === undefined)
      notes.push(`usage.cost ${preview(usage.cost)} is not a bounded decimal: priced by the table`);
    else result.reportedCostUsd = cost;
  }
  return { usage: result, raw: native, notes };
}

function isPositiveCount(value: unknown): boolean {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0;
}

function needsSourceDigits(usage: Record<string, unknown>): boolean {
  return (
    (usage.cost !== undefined && usage.cost !== null) ||
    !isPositiveCount(usage.prompt_tokens) ||
    !isPositiveCount(usage.completion_tokens)
  );
}

/** The `usage` of a JSON text, every number as its source text; undefined if it is not an object. */
function usageWithSourceDigits(sourceText: string): Record<string, unknown> | undefined {
  let parsed: unknown;
  try {
    parsed = parseLossless(sourceText, null, {
      parseNumber: (text) => new NumberText(text),
      // As JSON.parse: the last of a repeated key counts.
      onDuplicateKey: ({ newValue }) => newValue,
    });
  } catch {
    return undefined;
  }
  const usage = (parsed as { usage?: unknown } | null)?.usage;
  return typeof usage === 'object' && usage !== null && !Array.isArray(usage)
    ? (usage as Record<string, unknown>)
    : undefined;
}

function count(value: unknown): number | undefined {
  if (value instanceof NumberText) return COUNT_TEXT.test(value.text) ? Number(value.text) : undefined;
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && !Object.is(value, -0)
    ? value
    : undefined;
}

/** The cost as bounded decimal text: its source digits where known, else the float's shortest form. */
function costText(value: unknown): string | undefined {
  let text: string | undefined;
  if (value instanceof NumberText) text = value.text;
  else if (typeof value === 'number' && Number.isFinite(value) && !Object.is(value, -0)) text = String(value);
  return text !== undefined && COST_TEXT.test(text) ? text : undefined;
}

function preview(value: unknown): string {
  const text = value instanceof NumberText ? value.text : (JSON.stringify(value) ?? String(value));
  return text.length > 40 ? `${text.slice(0, 40)}...` : text;
}

/** The numeric, non-negative entries of a `*_tokens_details` object (bounded in number). */
function numericDetails(value: unknown): Record<string, number> | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const out: Record<string, number> = {};
  let fields = 0;
  for (const [name, entry] of Object.entries(value)) {
    if (fields >= MAX_DETAIL_FIELDS) break;
    const n = count(entry);
    if (n !== undefined && /^[a-z_]{1,64}$/.test(name)) {
      out[name] = n;
      fields += 1;
    }
  }
  return fields > 0 ? out : undefined;
}

/**
 * OpenAI's usage block as the client receives it, with the billed cost as exact decimal text. The
 * upstream's details (cached, reasoning, audio tokens...) pass through, with the billed counts.
 */
export function usageForClient(usage: TokenUsage, billedUsd: string): ClientUsage {
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

/** OpenAI's `CompletionUsage`, with the billed `cost` as an exact decimal. */
export type ClientUsage = Omit<CompletionUsage, 'prompt_tokens_details' | 'completion_tokens_details'> & {
  prompt_tokens_details: Record<string, number>;
  completion_tokens_details?: Record<string, number>;
  cost: JsonDecimal;
};

/** JSON.rawJSON (Node 21 and later): a value JSON.stringify writes as the given text, unquoted. */
const rawJson = (JSON as { rawJSON?: (text: string) => unknown }).rawJSON;
const MARK = '\u0000decimal:';

/** A decimal that serialises as a bare JSON number with exactly its digits (no float in between). */
export class JsonDecimal {
  constructor(readonly text: string) {}
  /**
   * On Node 22 (Lambda's runtime) the digits themselves, so that plain JSON.stringify writes them; on
   * Node 20 a marked string, which stringifyJson unquotes. Why not a replacer: it is called for every
   * key and value and cost about 14 us of a JSON reply's serialisation (Node 22, calls 5 ms apart),
   * rawJSON about 1.
   */
  toJSON(): unknown {
    return rawJson ? rawJson(this.text) : `${MARK}${this.text}`;
  }
}

/** JSON.stringify that writes JsonDecimal values as bare numbers with their exact digits. */
export function stringifyJson(value: unknown): string {
  const json = JSON.stringify(value);
  return rawJson ? json : json.replace(/"\\u0000decimal:(-?[0-9.]+)"/g, '$1');
}
