import { createHash } from 'node:crypto';
import { type Directives, parseDirectives } from './directives.js';
import {
  exampleFor,
  formattedContent,
  type JsonSchema,
  logprobsFor,
  stopIndex,
  type TokenLogprob,
  tokenPieces,
} from './shaping.js';
import { countPromptTokens, countTextTokens, ONE_TOKEN_WORDS, textOf } from './tokens.js';

/**
 * An OpenAI-compatible upstream: deterministic replies with real token counts, streaming, tool
 * calls, cached tokens and fault directives (`[[sim:...]]` in the last user message). Transport-free:
 * `server.ts` serves it over HTTP and `handler.ts` from a Lambda Function URL.
 */

export interface SimulatorOptions {
  /** When set, requests must carry `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
}

export interface SimRequest {
  method: string;
  path: string;
  headers: Record<string, string | undefined>;
  body: string;
}

/** A piece of the response body. `drop` ends the connection abruptly (no clean end). */
type SimPiece = { text: string; delayMs?: number } | { drop: true };

export interface SimResponse {
  status: number;
  headers: Record<string, string>;
  /** Delay before the status line and headers are sent. */
  headerDelayMs: number;
  body: SimPiece[];
}

interface ToolDef {
  type?: string;
  function?: { name?: string; parameters?: JsonSchema };
}
interface ChatBody {
  model?: unknown;
  messages?: unknown;
  stream?: unknown;
  stream_options?: { include_usage?: unknown } | null;
  max_tokens?: unknown;
  max_completion_tokens?: unknown;
  tools?: ToolDef[];
  tool_choice?: unknown;
  stop?: unknown;
  response_format?: unknown;
  logprobs?: unknown;
  top_logprobs?: unknown;
}
interface Message {
  role?: string;
  content?: unknown;
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}): SimResponse => ({
  status,
  headers: { 'content-type': 'application/json', ...headers },
  headerDelayMs: 0,
  body: [{ text: JSON.stringify(body) }],
});

const errorBody = (message: string, type: string, code: string | null) => ({
  error: { message, type, param: null, code },
});

export function createSimulator(options: SimulatorOptions = {}) {
  return {
    async handle(req: SimRequest): Promise<SimResponse> {
      if (options.apiKey && req.headers.authorization !== `Bearer ${options.apiKey}`) {
        return json(
          401,
          errorBody('Incorrect API key provided.', 'invalid_request_error', 'invalid_api_key'),
        );
      }
      const path = req.path.replace(/\/+$/, '');
      if (path === '/v1/models' && req.method === 'GET') {
        return json(200, {
          object: 'list',
          data: ['sim-fast', 'sim-pro', 'sim-heavy'].map((id) => ({
            id,
            object: 'model',
            created: 0,
            owned_by: 'simulator',
          })),
        });
      }
      if (path !== '/v1/chat/completions' || req.method !== 'POST') {
        return json(
          404,
          errorBody(`Unknown request URL: ${req.method} ${req.path}`, 'invalid_request_error', 'unknown_url'),
        );
      }
      let body: ChatBody;
      try {
        body = JSON.parse(req.body) as ChatBody;
      } catch {
        return json(
          400,
          errorBody('We could not parse the JSON body of your request.', 'invalid_request_error', null),
        );
      }
      if (!Array.isArray(body.messages)) {
        return json(
          400,
          errorBody(
            "Missing required parameter: 'messages'.",
            'invalid_request_error',
            'missing_required_parameter',
          ),
        );
      }
      return complete(body, body.messages as Message[]);
    },
  };
}

function complete(body: ChatBody, messages: Message[]): SimResponse {
  const lastUser = [...messages].reverse().find((m) => m.role === 'user');
  const directives = parseDirectives(textOf(lastUser?.content));
  const promptTokens = countPromptTokens(messages);
  if (directives.error !== undefined) return errorResponse(directives.error, promptTokens);

  const seed = createHash('sha256').update(JSON.stringify(messages)).digest();
  const id = `chatcmpl-${seed.subarray(0, 12).toString('hex')}`;
  const created = Math.floor(Date.now() / 1000);
  const model = typeof body.model === 'string' ? body.model : 'sim';
  const reply = buildReply(body, messages, directives, seed);
  const usage = directives.noUsage
    ? undefined
    : {
        prompt_tokens: promptTokens,
        completion_tokens: reply.completionTokens,
        total_tokens: promptTokens + reply.completionTokens,
        prompt_tokens_details: { cached_tokens: Math.min(directives.cached ?? 0, promptTokens) },
      };

  if (body.stream === true) {
    const includeUsage = body.stream_options?.include_usage === true && usage !== undefined;
    return streamResponse(id, created, model, reply, includeUsage ? usage : undefined, directives);
  }
  const completion = {
    id,
    object: 'chat.completion',
    created,
    model,
    choices: [
      {
        index: 0,
        message: { ...reply.message, refusal: null },
        logprobs: reply.logprobs ? { content: reply.logprobs, refusal: null } : null,
        finish_reason: reply.finishReason,
      },
    ],
    ...(usage ? { usage } : {}),
    system_fingerprint: 'fp_simulator',
  };
  const text = JSON.stringify(completion);
  const response: SimResponse = {
    status: 200,
    headers: { 'content-type': 'application/json' },
    headerDelayMs: directives.firstByteDelayMs ?? 0,
    body: [],
  };
  if (directives.cutAfter !== undefined) {
    response.body = [
      { text: text.slice(0, Math.floor(text.length / 2)), delayMs: directives.delayMs ?? 0 },
      { drop: true },
    ];
  } else {
    response.body = [{ text, delayMs: directives.delayMs ?? 0 }];
  }
  return response;
}

function errorResponse(status: number, promptTokens: number): SimResponse {
  if (status === 400) {
    return json(
      400,
      errorBody(
        `This model's maximum context length is 8192 tokens. However, your messages resulted in ${promptTokens + 9000} tokens.`,
        'invalid_request_error',
        'context_length_exceeded',
      ),
    );
  }
  if (status === 429)
    return json(429, errorBody('Rate limit reached.', 'rate_limit_error', 'rate_limit_exceeded'), {
      'retry-after': '1',
    });
  return json(status, errorBody(`The simulator answered ${status} as asked.`, 'server_error', null));
}

interface Reply {
  message: { role: 'assistant'; content: string | null; tool_calls?: ToolCall[] };
  /** The streamed deltas, in order (content pieces or tool-call fragments). */
  deltas: Record<string, unknown>[];
  completionTokens: number;
  finishReason: 'stop' | 'length' | 'tool_calls';
  /** With `logprobs`: one entry per token; the text deltas are then those tokens, one per delta. */
  logprobs?: TokenLogprob[];
}
interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

function buildReply(body: ChatBody, messages: Message[], directives: Directives, seed: Buffer): Reply {
  const last = messages.at(-1);
  const cap = [body.max_tokens, body.max_completion_tokens].find(
    (v): v is number => typeof v === 'number' && v > 0,
  );
  const tool = pickTool(body);
  if (tool && last?.role !== 'tool') {
    const name = tool.function?.name ?? 'tool';
    let args = JSON.stringify(exampleFor(tool.function?.parameters ?? { type: 'object' }));
    // A model stopped by max_tokens mid-call leaves its arguments cut where the cap fell.
    const cut = cap !== undefined && countTextTokens(name + args) > cap;
    while (args.length > 0 && cap !== undefined && countTextTokens(name + args) > cap)
      args = args.slice(0, -1);
    const call: ToolCall = {
      id: `call_${seed.subarray(12, 24).toString('hex')}`,
      type: 'function',
      function: { name, arguments: args },
    };
    const third = Math.max(1, Math.ceil(args.length / 3));
    const fragments = [args.slice(0, third), args.slice(third, 2 * third), args.slice(2 * third)];
    return {
      message: { role: 'assistant', content: null, tool_calls: [call] },
      deltas: [
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ index: 0, id: call.id, type: 'function', function: { name, arguments: '' } }],
        },
        ...fragments.map((fragment) => ({ tool_calls: [{ index: 0, function: { arguments: fragment } }] })),
      ],
      completionTokens: countTextTokens(name + args),
      finishReason: cut ? 'length' : 'tool_calls',
    };
  }
  let words: string[];
  if (last?.role === 'tool' && directives.tokens === undefined) {
    const result = ` The tool returned: ${textOf(last.content).slice(0, 40)}`;
    words = [result, ...pickWords(seed, 5)];
  } else {
    words = pickWords(seed, directives.tokens ?? 8 + ((seed[0] ?? 0) % 33));
  }
  // response_format makes the reply JSON; stop ends it before the first stop sequence; the token cap
  // ends it where the cap falls. Reshaped text is streamed token by token, as a model streams it.
  const formatted = formattedContent(body.response_format, words.join(''));
  let pieces = formatted === undefined ? words : tokenPieces(formatted);
  let content = pieces.join('');
  const stopAt = stopIndex(content, body.stop);
  if (stopAt !== undefined) {
    content = content.slice(0, stopAt);
    pieces = tokenPieces(content);
  }
  let finishReason: Reply['finishReason'] = 'stop';
  if (cap !== undefined && countTextTokens(content) > cap) {
    while (pieces.length > 0 && countTextTokens(pieces.join('')) > cap) pieces.pop();
    content = pieces.join('');
    finishReason = 'length';
  }
  const top = typeof body.top_logprobs === 'number' ? Math.min(Math.max(0, body.top_logprobs), 20) : 0;
  if (body.logprobs === true) pieces = tokenPieces(content);
  return {
    message: { role: 'assistant', content },
    deltas: [{ role: 'assistant', content: '' }, ...pieces.map((piece) => ({ content: piece }))],
    completionTokens: countTextTokens(content),
    finishReason,
    ...(body.logprobs === true ? { logprobs: logprobsFor(pieces, top, seed) } : {}),
  };
}

function pickWords(seed: Buffer, count: number): string[] {
  return Array.from(
    { length: count },
    (_, i) => ONE_TOKEN_WORDS[((seed[i % seed.length] ?? 0) + i) % ONE_TOKEN_WORDS.length] ?? ' the',
  );
}

function pickTool(body: ChatBody): ToolDef | undefined {
  if (!Array.isArray(body.tools) || body.tools.length === 0 || body.tool_choice === 'none') return undefined;
  const choice = body.tool_choice as { function?: { name?: string } } | undefined;
  const wanted = typeof choice === 'object' ? choice?.function?.name : undefined;
  return body.tools.find((t) => t.function?.name === wanted) ?? body.tools[0];
}

function streamResponse(
  id: string,
  created: number,
  model: string,
  reply: Reply,
  usage: Record<string, unknown> | undefined,
  directives: Directives,
): SimResponse {
  const envelope = {
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    system_fingerprint: 'fp_simulator',
  };
  // With logprobs, delta i (after the role delta) is token i - 1 and carries its entry.
  const logprobsOf = (i: number) => {
    const entry = i > 0 ? reply.logprobs?.[i - 1] : undefined;
    return entry ? { content: [entry], refusal: null } : null;
  };
  const events: string[] = reply.deltas.map((delta, i) =>
    JSON.stringify({
      ...envelope,
      choices: [{ index: 0, delta, logprobs: logprobsOf(i), finish_reason: null }],
    }),
  );
  const finish = {
    ...envelope,
    choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: reply.finishReason }],
  };
  if (usage && directives.usageOnLastChunk) {
    events.push(JSON.stringify({ ...finish, usage }));
  } else {
    events.push(JSON.stringify(finish));
    if (usage) events.push(JSON.stringify({ ...envelope, choices: [], usage }));
  }
  if (directives.runOn !== undefined) {
    // An upstream that never finishes on its own (bounded here so a test can use it safely).
    const extra = Array.from({ length: directives.runOn }, (_, i) =>
      JSON.stringify({
        ...envelope,
        choices: [{ index: 0, delta: { content: ` more${i}` }, logprobs: null, finish_reason: null }],
      }),
    );
    events.splice(reply.deltas.length, 0, ...extra);
  }
  const delayMs = directives.delayMs ?? 0;
  const body: SimPiece[] = [];
  for (const [index, event] of events.entries()) {
    const wait = index === directives.pauseAfter ? (directives.pauseMs ?? delayMs) : delayMs;
    if (directives.cutAfter !== undefined && index === directives.cutAfter) {
      body.push({ drop: true });
      break;
    }
    if (directives.malformedAfter !== undefined && index === directives.malformedAfter) {
      body.push({ text: 'data: {not json\n\n', delayMs: wait });
      break;
    }
    body.push({ text: `data: ${event}\n\n`, delayMs: wait });
  }
  const last = body.at(-1);
  if (last && !('drop' in last) && directives.malformedAfter === undefined)
    body.push({ text: 'data: [DONE]\n\n' });
  return {
    status: 200,
    headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' },
    headerDelayMs: directives.firstByteDelayMs ?? 0,
    body,
  };
}
