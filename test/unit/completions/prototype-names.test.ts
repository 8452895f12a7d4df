import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { complete, takeChatRequest } from '../../../functions/completions/complete.js';
import { type CompletionsConfig, loadCompletionsConfig } from '../../../functions/completions/config.js';
import { authorize, type Principal } from '../../../functions/core/access.js';
import { parseBearerKey } from '../../../functions/core/auth.js';
import { toHttpError } from '../../../functions/core/errors.js';
import { usdToNano } from '../../../functions/core/money.js';
import type { FunctionUrlEvent } from '../../../functions/shared/http.js';
import { loadCaller } from '../../../functions/shared/principal.js';
import { routeOf } from '../../../functions/shared/routing.js';
import { accountWith } from '../../support/fixtures.js';
import { MemoryStore } from '../../support/memory-store.js';

/**
 * A hostile client sends Object.prototype's names wherever a string of its own is used as a key
 * (a part type, a role, a tier, a tool or response_format type, a field name, a path, a header): every
 * one is answered 200 or 4xx, never 5xx, by targets that forward extra fields and by targets that drop
 * them (the issue: a part type `constructor` looked up in a plain object made a 502).
 */
const NAMES = [...Object.getOwnPropertyNames(Object.prototype), 'prototype'];

/** Where a name goes: a request body, as JSON text (`__proto__` must stay a key, not a prototype). */
const PLACES: Record<string, (name: string) => string> = {
  'part type': (name) => body({ messages: [{ role: 'user', content: [{ type: name, text: 'hi' }] }] }),
  'assistant part type': (name) =>
    body({
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: [{ type: name, text: 'x' }] },
        { role: 'user', content: 'and?' },
      ],
    }),
  role: (name) => body({ messages: [{ role: name, content: 'hi' }] }),
  model: (name) => body({ model: name }),
  'tool type': (name) => body({ tools: [{ type: name, function: { name: 'f' } }] }),
  tool_choice: (name) => body({ tool_choice: name }),
  'tool_choice type': (name) => body({ tool_choice: { type: name, function: { name: 'f' } } }),
  'tool name': (name) =>
    body({
      tools: [{ type: 'function', function: { name } }],
      tool_choice: { type: 'function', function: { name } },
    }),
  'response_format type': (name) => body({ response_format: { type: name } }),
  reasoning_effort: (name) => body({ reasoning_effort: name }),
  'top-level field': (name) => withKey(body({ KEY: 1 }), name),
  'message field': (name) => withKey(body({ messages: [{ role: 'user', content: 'hi', KEY: 'x' }] }), name),
  'part field': (name) =>
    withKey(body({ messages: [{ role: 'user', content: [{ type: 'text', text: 'hi', KEY: 'x' }] }] }), name),
  'stream_options field': (name) => withKey(body({ stream: true, stream_options: { KEY: true } }), name),
  'metadata key': (name) => withKey(body({ metadata: { KEY: 'v' } }), name),
  'logit_bias key': (name) => withKey(body({ logit_bias: { KEY: 1 } }), name),
};

function body(fields: Record<string, unknown>): string {
  return JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }], ...fields });
}
function withKey(json: string, name: string): string {
  return json.replace('"KEY"', JSON.stringify(name));
}

let server: ReturnType<typeof createServer>;
const received: string[] = [];
let configs: Record<'forward' | 'drop', CompletionsConfig>;
beforeAll(async () => {
  // An upstream that answers every request with a short reply (a stream or a JSON body).
  server = createServer((req, res) => {
    let text = '';
    req.on('data', (piece) => {
      text += piece;
    });
    req.on('end', () => {
      received.push(text);
      const stream = (JSON.parse(text) as { stream?: boolean }).stream === true;
      const envelope = { id: 'u', created: 1, model: 'm' };
      const usage = { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 };
      if (!stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        const message = { role: 'assistant', content: 'ok' };
        res.end(
          JSON.stringify({
            ...envelope,
            object: 'chat.completion',
            choices: [{ index: 0, message, finish_reason: 'stop' }],
            usage,
          }),
        );
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (fields: object) =>
        `data: ${JSON.stringify({ ...envelope, object: 'chat.completion.chunk', ...fields })}\n\n`;
      res.end(
        chunk({
          choices: [{ index: 0, delta: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
        }) +
          chunk({ choices: [], usage }) +
          'data: [DONE]\n\n',
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const config = (extraFields: 'forward' | 'drop') => {
    const target = [
      { baseUrl: url, model: 'm', extraFields, prices: { input: '1', cachedInput: '0.1', output: '2' } },
    ];
    return loadCompletionsConfig({
      TIERS_CONFIG: JSON.stringify({ 'svc-fast': target, 'svc-pro': target, 'svc-heavy': target }),
      MAX_CONCURRENCY: '100',
    });
  };
  configs = { forward: config('forward'), drop: config('drop') };
});
afterAll(() => server?.close());

async function statusOf(
  text: string,
  extraFields: 'forward' | 'drop',
  caller: Principal,
  store: MemoryStore,
) {
  const settling: Promise<void>[] = [];
  try {
    const event = { body: text, isBase64Encoded: false } as unknown as FunctionUrlEvent;
    const result = await complete(
      takeChatRequest(event),
      { caller, requestId: 'r', remainingMs: 300_000, afterReply: (work) => settling.push(work) },
      { store, config: configs[extraFields], credential: async () => undefined },
    );
    let reply = '';
    if (typeof result.body === 'string') reply = result.body;
    else for await (const part of result.body as Readable) reply += part.toString();
    // A stream that failed says so in an error chunk.
    return reply.includes('"error"') ? 500 : result.statusCode;
  } catch (error) {
    return toHttpError(error).statusCode;
  } finally {
    await Promise.all(settling);
  }
}

describe("Object.prototype's names as a client's strings", () => {
  it.each(Object.keys(PLACES))('as a %s: never a 5xx, for any target', async (place) => {
    const store = new MemoryStore();
    const key = await accountWith(store, '1000', 'acct');
    const caller = authorize(await loadCaller(store, `Bearer ${key.key}`), {
      requireCredit: true,
      topUpUrl: 'https://x',
    });
    const statuses: string[] = [];
    for (const name of NAMES)
      for (const extraFields of ['forward', 'drop'] as const) {
        const status = await statusOf(
          (PLACES[place] as (name: string) => string)(name),
          extraFields,
          caller,
          store,
        );
        if (status >= 500) statuses.push(`${name} (${extraFields}): ${status}`);
      }
    expect(statuses).toEqual([]);
  });

  it('as an unknown part type: a 400 naming the part', async () => {
    const store = new MemoryStore();
    const caller: Principal = {
      keyId: 'k',
      accountId: 'a',
      keyStatus: 'active',
      accountStatus: 'active',
      balanceNano: usdToNano('1000'),
      heldNano: 0n,
    };
    const text = body({
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'constructor' }] }],
    });
    const event = { body: text, isBase64Encoded: false } as unknown as FunctionUrlEvent;
    const error = await complete(
      takeChatRequest(event),
      { caller, requestId: 'r', remainingMs: 300_000, afterReply: () => {} },
      { store, config: configs.drop, credential: async () => undefined },
    ).catch((e: unknown) => e);
    expect(toHttpError(error).toBody()).toEqual({
      error: {
        message:
          "Invalid value for 'messages[0].content[1].type': \"constructor\". Supported values are: 'text', 'image_url', 'input_audio', 'file'.",
        type: 'invalid_request_error',
        param: 'messages[0].content[1].type',
        code: 'invalid_value',
      },
    });
  });

  it('as a path or an authorization header: a 404 or a 401', () => {
    for (const name of NAMES) {
      const event = {
        rawPath: `/api/v1/${name}`,
        requestContext: { http: { method: 'POST' } },
      } as unknown as FunctionUrlEvent;
      expect(() => routeOf(event, 'completions')).toThrow(expect.objectContaining({ statusCode: 404 }));
      expect(() => parseBearerKey(name)).toThrow(expect.objectContaining({ statusCode: 401 }));
      expect(() => parseBearerKey(`${name} x`)).toThrow(expect.objectContaining({ statusCode: 401 }));
    }
  });
});
