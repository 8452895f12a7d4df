/**
 * A measured alternative, kept in bench/ and NOT used by the service: splicing our envelope into an
 * upstream chunk's text instead of the relay's parse + re-serialise (issue 15), compared by
 * `bench/chunk-rewrite.ts`. It rewrites a chunk in about 0.16-0.3 us against 2.7-3.3 us, but a relayed
 * chunk costs about 30 us of gateway CPU in all (SSE parsing, stream writes), so it would save under a
 * tenth of that for an anchored regular expression over every upstream's exact byte layout: not a
 * clear enough win to carry in the request path. Kept so the comparison can be re-run.
 *
 * Most chunks are a single content delta in the compact form every OpenAI-compatible server emits
 * (`{"id":..,"object":"chat.completion.chunk","created":..,"model":..,...,"choices":[{"index":0,
 * "delta":{"content":".."},...,"finish_reason":null}]}`). For those the only change the relay makes
 * is the envelope (`id`, `created`, `model`), plus dropping a `"usage":null` member. This module
 * recognises that form with one anchored regular expression and splices our envelope in front of the
 * unchanged rest of the text, taking the delta text from the match: no parse, no re-serialisation.
 * Every other chunk (role changes with tool calls, finish reasons, usage, errors, anything not
 * compact) goes the current way, so the output is byte-identical to the relay's for the chunk
 * shapes of the relay tests, and the same JSON value for any input.
 */
import { textOfDelta } from '../functions/completions/relay.js';
import { readUpstreamUsage, type UsageReport } from '../functions/core/usage.js';

export interface ChunkEnvelope {
  id: string;
  created: number;
  model: string;
}

export type RewrittenChunk =
  /**
   * Forward `json` to the client; `text` is the delta text streamed (the basis of an estimate),
   * `finishReason` the first choice's finish_reason when it is a string.
   */
  | {
      kind: 'forward';
      json: string;
      text: string;
      usage: UsageReport | undefined;
      finishReason: string | undefined;
    }
  /** A chunk without choices (usage only): not forwarded, our own final chunk replaces it. */
  | { kind: 'usage-only'; usage: UsageReport | undefined }
  | { kind: 'error' }
  | { kind: 'malformed' };

/** The rewriter for one stream: its envelope serialised once. */
export interface ChunkRewriter {
  rewrite(data: string): RewrittenChunk;
}

/**
 * The common compact content chunk. Groups: 1 the members between `model` and `choices` (only
 * string/null/integer values of known names), 2 the choice up to the delta, 3 the delta's content
 * string body (still JSON-escaped), 4 the rest of the choice, 5 a trailing `,"usage":null`.
 */
const COMPACT_CONTENT_CHUNK =
  /^\{"id":"[^"\\]*","object":"chat\.completion\.chunk","created":\d+,"model":"[^"\\]*"((?:,"(?:system_fingerprint|service_tier)":(?:"[^"\\]*"|null))*),"choices":\[(\{"index":\d+,"delta":\{(?:"role":"assistant",)?"content":")((?:[^"\\]|\\.)*)("\}(?:,"logprobs":null)?,"finish_reason":null\}\])(,"usage":null)?\}$/;

/** Whether a chunk takes the splice path (for tests and the micro-benchmark). */
export function isCompactContentChunk(data: string): boolean {
  return COMPACT_CONTENT_CHUNK.test(data);
}

export function chunkRewriter(envelope: ChunkEnvelope): ChunkRewriter {
  const prefix = `{"id":${JSON.stringify(envelope.id)},"object":"chat.completion.chunk","created":${JSON.stringify(envelope.created)},"model":${JSON.stringify(envelope.model)}`;
  return {
    rewrite(data) {
      const match = COMPACT_CONTENT_CHUNK.exec(data);
      if (match) {
        const [, between = '', choiceHead = '', content = '', choiceTail = ''] = match;
        const text = content.includes('\\') ? (JSON.parse(`"${content}"`) as string) : content;
        return {
          kind: 'forward',
          json: `${prefix}${between},"choices":[${choiceHead}${content}${choiceTail}}`,
          text,
          usage: undefined,
          finishReason: undefined,
        };
      }
      return rewriteParsed(data, envelope);
    },
  };
}

/** The relay's current path, step for step: parse, drop usage, normalise finish_reason, stringify. */
export function rewriteParsed(data: string, envelope: ChunkEnvelope): RewrittenChunk {
  let chunk: Record<string, unknown>;
  try {
    chunk = JSON.parse(data) as Record<string, unknown>;
  } catch {
    return { kind: 'malformed' };
  }
  if (typeof chunk !== 'object' || chunk === null) return { kind: 'malformed' };
  if (chunk.error !== undefined) return { kind: 'error' };
  const usage = readUpstreamUsage(chunk.usage, data);
  const choices = Array.isArray(chunk.choices) ? (chunk.choices as Record<string, unknown>[]) : [];
  if (choices.length === 0) return { kind: 'usage-only', usage };
  let text = '';
  for (const choice of choices) text += textOfDelta(choice.delta);
  const { usage: _dropped, ...rest } = chunk;
  const normalised = choices.map((choice) => ({ ...choice, finish_reason: choice.finish_reason ?? null }));
  const json = JSON.stringify({
    ...rest,
    id: envelope.id,
    object: 'chat.completion.chunk',
    created: envelope.created,
    model: envelope.model,
    choices: normalised,
  });
  const finish = choices[0]?.finish_reason;
  return {
    kind: 'forward',
    json,
    text,
    usage,
    finishReason: typeof finish === 'string' ? finish : undefined,
  };
}
