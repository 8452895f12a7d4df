/**
 * The request fields that shape a simulated reply as OpenAI's API shapes a real one: `stop` (the text
 * ends before the first stop sequence, which is not returned), `response_format` (`json_object`: a JSON
 * object; `json_schema`: a value generated from the schema's types) and `logprobs`/`top_logprobs`
 * (one entry per token: token, logprob, bytes, and that many alternatives).
 */
import { decode, encode } from 'gpt-tokenizer';
import { ONE_TOKEN_WORDS } from './tokens.js';

export type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  enum?: unknown[];
  const?: unknown;
  items?: JsonSchema;
  minItems?: number;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
};

/** A value that satisfies a simple JSON schema: every property, typed; the first of enum/anyOf/oneOf. */
export function exampleFor(schema: JsonSchema): unknown {
  if (schema.const !== undefined) return schema.const;
  if (schema.enum && schema.enum.length > 0) return schema.enum[0];
  const alternative = schema.anyOf?.[0] ?? schema.oneOf?.[0];
  if (alternative) return exampleFor(alternative);
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type;
  switch (type) {
    case 'string':
      return 'example'.padEnd(schema.minLength ?? 0, 'x');
    case 'number':
    case 'integer':
      return Math.min(Math.max(1, Math.ceil(schema.minimum ?? 1)), schema.maximum ?? 1);
    case 'boolean':
      return true;
    case 'array':
      return Array.from({ length: schema.minItems ?? (schema.items ? 1 : 0) }, () =>
        exampleFor(schema.items ?? {}),
      );
    case 'null':
      return null;
    default: {
      const out: Record<string, unknown> = {};
      for (const [name, property] of Object.entries(schema.properties ?? {}))
        out[name] = exampleFor(property);
      return out;
    }
  }
}

/** The reply's text under `response_format`, or undefined for plain text. */
export function formattedContent(format: unknown, words: string): string | undefined {
  if (typeof format !== 'object' || format === null) return undefined;
  const { type, json_schema: jsonSchema } = format as { type?: unknown; json_schema?: { schema?: unknown } };
  if (type === 'json_object') return JSON.stringify({ answer: words.trim() });
  if (type === 'json_schema') {
    const schema = jsonSchema?.schema;
    return JSON.stringify(exampleFor(typeof schema === 'object' && schema !== null ? schema : {}));
  }
  return undefined;
}

/** Where the text ends under `stop` (a string or up to 4): before the earliest stop sequence. */
export function stopIndex(text: string, stop: unknown): number | undefined {
  const sequences = (Array.isArray(stop) ? stop : [stop]).filter(
    (s): s is string => typeof s === 'string' && s !== '',
  );
  const found = sequences.map((s) => text.indexOf(s)).filter((i) => i >= 0);
  return found.length > 0 ? Math.min(...found) : undefined;
}

/** The text as its tokens (o200k), each decoded on its own: what a model streams, one by one. */
export function tokenPieces(text: string): string[] {
  return encode(text).map((token) => decode([token]));
}

export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

const bytesOf = (token: string) => [...Buffer.from(token, 'utf8')];

/**
 * OpenAI's `logprobs.content` for these tokens: a deterministic logprob per token (from the seed),
 * and `top` alternatives, the chosen token first, each less likely than the one before.
 */
export function logprobsFor(pieces: readonly string[], top: number, seed: Buffer): TokenLogprob[] {
  let offset = 0;
  return pieces.map((token) => {
    const logprob = -((seed[offset % seed.length] ?? 0) % 50) / 100;
    const alternatives = ONE_TOKEN_WORDS.filter((word) => word !== token).slice(
      offset % 7,
      (offset % 7) + top,
    );
    offset += 1;
    return {
      token,
      logprob,
      bytes: bytesOf(token),
      top_logprobs: [token, ...alternatives].slice(0, top).map((candidate, rank) => ({
        token: candidate,
        logprob: rank === 0 ? logprob : logprob - rank,
        bytes: bytesOf(candidate),
      })),
    };
  });
}
