/**
 * The upstream's reply, parsed once where it enters: each SSE event's data and each JSON body become a
 * typed value (OpenAI's `ChatCompletionChunk` / `ChatCompletion`, with the documented extras a
 * provider may add: `reasoning` and `reasoning_content` text). The schemas keep the fields we document
 * and drop everything else, so a provider's private fields (`provider`, `x_upstream_internal`...)
 * reach the client on neither path; the usage is read with bounded numbers (core/usage.ts). Code past this
 * module works on these values, never on the upstream's text.
 */
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionMessage,
  ChatCompletionMessageFunctionToolCall,
} from 'openai/resources/chat/completions';
import * as z from 'zod';
import { cutToBytes } from './strings.js';
import { readUpstreamUsage, type UsageReport } from './usage.js';

/**
 * The reply schemas, built on first use, not at import: an instance's init does not pay for them
 * (building them with schemas.ts's request schema took about 9 ms, Node 22, the two modules' import
 * after zod's and the tier schemas', median of 9 processes); its first request does.
 */
function buildReplySchemas() {
  const text = z.string().nullable().optional();
  /** finish_reason: OpenAI's values, and the few others providers send ('error', 'end_turn'...), short. */
  const finishReason = z.string().max(32).nullable().optional();

  const TopLogprob = z.object({
    token: z.string(),
    logprob: z.number(),
    bytes: z.array(z.number()).nullable().optional(),
  });
  const TokenLogprob = TopLogprob.extend({ top_logprobs: z.array(TopLogprob).optional() });
  const Logprobs = z.object({
    content: z.array(TokenLogprob).nullable().optional(),
    refusal: z.array(TokenLogprob).nullable().optional(),
  });

  const FunctionCallDelta = z.object({ name: z.string().optional(), arguments: z.string().optional() });
  const ToolCallDelta = z.object({
    index: z.int().min(0).max(1_023).default(0),
    id: z.string().optional(),
    type: z.literal('function').optional(),
    function: FunctionCallDelta.optional(),
  });
  const ToolCall = z.object({
    id: z.string().default(''),
    type: z.literal('function').default('function'),
    function: z.object({ name: z.string(), arguments: z.string().default('') }),
  });
  const Annotation = z.object({
    type: z.literal('url_citation'),
    url_citation: z.object({
      start_index: z.number(),
      end_index: z.number(),
      title: z.string(),
      url: z.string(),
    }),
  });
  const Audio = z.object({
    id: z.string(),
    data: z.string(),
    expires_at: z.number(),
    transcript: z.string(),
  });
  /**
   * OpenRouter's structured reasoning (`reasoning.text`, `reasoning.summary`, `reasoning.encrypted`
   * entries), which clients echo back on the next turn; its text is the `reasoning` field's.
   */
  const ReasoningDetails = z.array(z.looseObject({ type: z.string().max(64) })).max(1_024);

  /** The text fields every message and delta may carry, and what they bill by. */
  const TextFields = {
    content: text,
    refusal: text,
    /** OpenRouter's and vLLM's reasoning text. */
    reasoning: text,
    /** DeepSeek's and llama.cpp's reasoning text. */
    reasoning_content: text,
    reasoning_details: ReasoningDetails.optional(),
    annotations: z.array(Annotation).max(1_024).optional(),
  };

  const Delta = z.object({
    role: z.enum(['assistant', 'developer', 'system', 'user', 'tool']).optional(),
    ...TextFields,
    tool_calls: z.array(ToolCallDelta).max(128).optional(),
    function_call: FunctionCallDelta.optional(),
  });

  const ChunkChoice = z.object({
    index: z.int().min(0).max(1_023).default(0),
    delta: Delta.default({}),
    logprobs: Logprobs.nullable().default(null),
    // OpenAI's chunk schema requires it (null until the end); some upstreams omit it.
    finish_reason: finishReason.transform((value) => value ?? null),
  });

  /** A chunk has choices (empty on the usage-only last chunk), or at least a usage. */
  const ChunkSchema = z.object({
    choices: z.array(ChunkChoice).max(8),
    system_fingerprint: z.string().max(256).optional(),
    service_tier: z.string().max(32).nullable().optional(),
  });
  const UsageOnlyChunk = z.object({ usage: z.looseObject({}) }).transform(() => ({ choices: [] }));

  /** Some providers answer content as an array of text parts: it is delivered as the string it spells. */
  const MessageContent = z
    .union([z.string(), z.array(z.object({ text: z.string().optional() }))])
    .nullable()
    .default(null)
    .transform((value) => (Array.isArray(value) ? value.map((part) => part.text ?? '').join('') : value));

  const Message = z.object({
    role: z.literal('assistant').catch('assistant'),
    ...TextFields,
    content: MessageContent,
    refusal: z.string().nullable().default(null),
    tool_calls: z.array(ToolCall).max(128).optional(),
    function_call: z.object({ name: z.string(), arguments: z.string() }).optional(),
    audio: Audio.nullable().optional(),
  });

  const CompletionChoice = z.object({
    index: z.int().min(0).max(1_023).default(0),
    message: Message,
    logprobs: Logprobs.nullable().default(null),
    finish_reason: finishReason.transform((value) => value ?? 'stop'),
  });

  const CompletionSchema = z.object({
    choices: z.array(CompletionChoice).min(1).max(8),
    system_fingerprint: z.string().max(256).optional(),
    service_tier: z.string().max(32).nullable().optional(),
  });

  return { Delta, ChunkChoice, ChunkSchema, UsageOnlyChunk, Message, CompletionChoice, CompletionSchema };
}
let replySchemasBuilt: ReturnType<typeof buildReplySchemas> | undefined;
const replySchemas = () => {
  replySchemasBuilt ??= buildReplySchemas();
  return replySchemasBuilt;
};

/** Reasoning text as OpenRouter, vLLM, DeepSeek and llama.cpp add it to a message or delta. */
interface ReasoningText {
  reasoning?: string | null;
  reasoning_content?: string | null;
  reasoning_details?: { type: string; [field: string]: unknown }[];
}
type ReplyDelta = ChatCompletionChunk.Choice.Delta & ReasoningText;
/** A reply message: OpenAI's, with function tool calls only (the only kind an upstream reply carries here). */
export type ReplyMessage = Omit<ChatCompletionMessage, 'tool_calls'> & {
  tool_calls?: ChatCompletionMessageFunctionToolCall[];
} & ReasoningText;
/** A chunk's choices and extras as the upstream sent them; the envelope (id, model...) is ours. */
type UpstreamChunk = Pick<ChatCompletionChunk, 'system_fingerprint' | 'service_tier'> & {
  choices: (Omit<ChatCompletionChunk.Choice, 'delta'> & { delta: ReplyDelta })[];
};
type UpstreamCompletion = Pick<ChatCompletion, 'system_fingerprint' | 'service_tier'> & {
  choices: (Omit<ChatCompletion.Choice, 'message' | 'finish_reason'> & {
    message: ReplyMessage;
    finish_reason: ChatCompletion.Choice['finish_reason'];
  })[];
};

/** One SSE event's data, parsed. */
export type UpstreamEvent =
  | { kind: 'chunk'; chunk: UpstreamChunk; usage: UsageReport | undefined }
  | { kind: 'done' }
  | { kind: 'error' }
  | { kind: 'malformed'; reason: string };

export function parseChunkData(data: string): UpstreamEvent {
  if (data === '[DONE]') return { kind: 'done' };
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    return { kind: 'malformed', reason: 'not JSON' };
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    return { kind: 'malformed', reason: 'not an object' };
  const raw = json as { error?: unknown; usage?: unknown };
  if (raw.error !== undefined && raw.error !== null) return { kind: 'error' };
  const chunk = chunkBySchema(json);
  if ('invalid' in chunk) return { kind: 'malformed', reason: chunk.invalid };
  return { kind: 'chunk', chunk, usage: readUpstreamUsage(raw.usage, data) };
}

/**
 * A stream's usage once a later chunk reports one: the later report counts, but a cost reported on an
 * earlier chunk is kept when the later one carries none. Some upstreams put the usage, cost included,
 * on the last chunk that still has choices and then end with a usage-only chunk without the cost:
 * billing that last report alone priced the reply by the table instead of 1.3x the upstream's cost.
 */
export function laterUsage(earlier: UsageReport | undefined, later: UsageReport): UsageReport {
  if (!earlier || !('usage' in earlier) || !('usage' in later)) return later;
  const cost = earlier.usage.reportedCostUsd;
  if (cost === undefined || later.usage.reportedCostUsd !== undefined) return later;
  return { ...later, usage: { ...later.usage, reportedCostUsd: cost } };
}

/** A chunk as the schemas read it (ChunkSchema, or a usage-only chunk), or why it is not one. */
function chunkBySchema(json: unknown): UpstreamChunk | { invalid: string } {
  const { ChunkSchema, UsageOnlyChunk } = replySchemas();
  let parsed = ChunkSchema.safeParse(json);
  if (!parsed.success && !(typeof json === 'object' && json !== null && 'choices' in json))
    parsed = UsageOnlyChunk.safeParse(json);
  return parsed.success ? (parsed.data as UpstreamChunk) : { invalid: issueOf(parsed.error) };
}

export type ParsedCompletion =
  | { ok: true; completion: UpstreamCompletion; usage: UsageReport | undefined }
  | { ok: false; reason: string };

export function parseCompletionBody(body: string): ParsedCompletion {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return { ok: false, reason: 'not JSON' };
  }
  const completion = completionBySchema(json);
  if ('invalid' in completion) return { ok: false, reason: completion.invalid };
  return {
    ok: true,
    completion,
    usage: readUpstreamUsage((json as { usage?: unknown }).usage, body),
  };
}

/** A completion as CompletionSchema reads it, or why it is not one. */
function completionBySchema(json: unknown): UpstreamCompletion | { invalid: string } {
  const parsed = replySchemas().CompletionSchema.safeParse(json);
  return parsed.success ? (parsed.data as UpstreamCompletion) : { invalid: issueOf(parsed.error) };
}

function issueOf(error: z.ZodError): string {
  const issue = error.issues[0];
  return `${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`.slice(0, 200);
}

type TextBearing = {
  content?: string | null | undefined;
  refusal?: string | null | undefined;
  reasoning?: string | null | undefined;
  reasoning_content?: string | null | undefined;
  tool_calls?:
    | readonly { function?: { name?: string | undefined; arguments?: string | undefined } | undefined }[]
    | undefined;
  function_call?: { name?: string | undefined; arguments?: string | undefined } | null | undefined;
};

/**
 * The text a message or delta carries (content, refusal, reasoning, tool calls): what is delivered,
 * what the output cap is measured on and what its tokens are estimated from, all the same text.
 */
export function textOf(m: TextBearing): string {
  let out = '';
  if (m.reasoning) out += m.reasoning;
  if (m.reasoning_content) out += m.reasoning_content;
  if (m.content) out += m.content;
  if (m.refusal) out += m.refusal;
  if (m.tool_calls)
    for (const call of m.tool_calls) out += (call.function?.name ?? '') + (call.function?.arguments ?? '');
  if (m.function_call) out += (m.function_call.name ?? '') + (m.function_call.arguments ?? '');
  return out;
}

/**
 * The output bound: a completion "clearly exceeds" its cap past BYTES_PER_TOKEN bytes of text per
 * allowed token (English averages about 4 bytes a token), allowed = cap + CAP_SLACK. The same bound
 * cuts a stream and a JSON reply.
 */
const BYTES_PER_TOKEN = 6;
export const CAP_SLACK = 16;
export function outputByteBound(cap: number): number {
  return (cap + CAP_SLACK) * BYTES_PER_TOKEN;
}

/**
 * A message cut to `maxBytes` of text, in the order it is generated: reasoning, content, refusal, then
 * tool calls (a call whose arguments do not fit keeps the part that does, as OpenAI's own length
 * finish leaves them; calls past the bound are dropped).
 */
export function cutMessage(message: ReplyMessage, maxBytes: number): ReplyMessage {
  let left = maxBytes;
  const take = (s: string): string => {
    const kept = cutToBytes(s, left);
    left -= Buffer.byteLength(kept);
    return kept;
  };
  const out: ReplyMessage = { ...message };
  if (out.reasoning) out.reasoning = take(out.reasoning);
  if (out.reasoning_content) out.reasoning_content = take(out.reasoning_content);
  if (out.content) out.content = take(out.content);
  if (out.refusal) out.refusal = take(out.refusal);
  if (out.tool_calls) {
    const calls: NonNullable<ReplyMessage['tool_calls']> = [];
    for (const call of out.tool_calls) {
      if (left <= 0) break;
      const name = take(call.function.name);
      if (name.length < call.function.name.length) break;
      calls.push({ ...call, function: { name, arguments: take(call.function.arguments) } });
    }
    if (calls.length > 0) out.tool_calls = calls;
    else delete out.tool_calls;
  }
  return out;
}
