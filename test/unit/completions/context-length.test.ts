import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { complete, takeChatRequest } from '../../../functions/completions/complete.js';
import { type CompletionsConfig, loadCompletionsConfig } from '../../../functions/completions/config.js';
import type { Principal } from '../../../functions/core/access.js';
import { mayExceedContext } from '../../../functions/core/context-length.js';
import { toHttpError } from '../../../functions/core/errors.js';
import { usdToNano } from '../../../functions/core/money.js';
import { COUNT_SLICE, CountBudget, estimatePromptTokens } from '../../../functions/core/tokens.js';
import type { FunctionUrlEvent } from '../../../functions/shared/http.js';
import { MemoryStore } from '../../support/memory-store.js';

/**
 * A prompt past the tier's context length is OpenAI's 400 `context_length_exceeded`, before any
 * upstream call and with nothing held or billed (the issue: a 200,007-token prompt on a 128,000-token
 * tier was served and billed).
 */
const CONTEXT = 1_000;

let server: ReturnType<typeof createServer>;
let upstreamCalls = 0;
let config: CompletionsConfig;
beforeAll(async () => {
  server = createServer((req, res) => {
    upstreamCalls += 1;
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'u',
          object: 'chat.completion',
          created: 1,
          model: 'm',
          choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 900, completion_tokens: 1, total_tokens: 901 },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const tier = {
    targets: [{ baseUrl: url, model: 'm', prices: { input: '1', cachedInput: '0.1', output: '2' } }],
    contextLength: CONTEXT,
  };
  config = loadCompletionsConfig({
    TIERS_CONFIG: JSON.stringify({ 'svc-fast': tier, 'svc-pro': tier, 'svc-heavy': tier }),
    MAX_CONCURRENCY: '100',
  });
});
afterAll(() => server?.close());

/** `n` tokens of prose as the tokenizer counts them (" hello" is one token). */
const words = (n: number) => 'hello'.concat(' hello'.repeat(n - 1));

async function send(fields: Record<string, unknown>, balanceUsd = '1') {
  const store = new MemoryStore();
  await store.createAccount('acct', usdToNano(balanceUsd), new Date().toISOString());
  const caller: Principal = {
    keyId: 'k',
    accountId: 'acct',
    keyStatus: 'active',
    accountStatus: 'active',
    balanceNano: usdToNano(balanceUsd),
    heldNano: 0n,
  };
  const before = upstreamCalls;
  const settling: Promise<void>[] = [];
  const body = JSON.stringify({ model: 'svc-fast', ...fields });
  const event = { body, isBase64Encoded: false } as unknown as FunctionUrlEvent;
  let status: number;
  let reply: unknown;
  try {
    const result = await complete(
      takeChatRequest(event),
      { caller, requestId: 'r', remainingMs: 300_000, afterReply: (work) => settling.push(work) },
      { store, config, credential: async () => undefined },
    );
    status = result.statusCode ?? 0;
    reply = JSON.parse(
      typeof result.body === 'string' ? result.body : await (result.body as Readable).toArray().then(String),
    );
  } catch (error) {
    status = toHttpError(error).statusCode;
    reply = toHttpError(error).toBody();
  }
  await Promise.all(settling);
  return {
    status,
    reply,
    upstreamCalls: upstreamCalls - before,
    storeCalls: store.calls,
    charges: (await store.listLedger('acct')).filter((entry) => entry.type === 'charge'),
  };
}

describe('a prompt past the context length', () => {
  it("is OpenAI's 400, before any upstream call or hold, nothing billed", async () => {
    const messages = [{ role: 'user', content: words(2_000) }];
    const prompt = await estimatePromptTokens(messages);
    const sent = await send({ messages });
    expect(sent.status).toBe(400);
    expect(sent.reply).toEqual({
      error: {
        message: `This model's maximum context length is 1000 tokens. However, your messages resulted in ${prompt} tokens. Please reduce the length of the messages.`,
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    });
    expect(prompt).toBeGreaterThan(2_000);
    expect(sent.upstreamCalls).toBe(0);
    // Not even a hold: the account's $1 would need one for a request of this worst case.
    expect(sent.storeCalls).toEqual([]);
    expect(sent.charges).toEqual([]);
  });

  it('counts max_tokens (or max_completion_tokens) when given, as OpenAI does', async () => {
    const messages = [{ role: 'user', content: words(900) }];
    const prompt = await estimatePromptTokens(messages);
    for (const field of ['max_tokens', 'max_completion_tokens']) {
      const sent = await send({ messages, [field]: 200 });
      expect(sent.status).toBe(400);
      expect((sent.reply as { error: { message: string } }).error.message).toBe(
        `This model's maximum context length is 1000 tokens. However, you requested ${prompt + 200} tokens (${prompt} in the messages, 200 in the completion). Please reduce the length of the messages or completion.`,
      );
      expect(sent.upstreamCalls).toBe(0);
    }
  });

  it('lets a prompt within it through, with its max_tokens, or with none (the tier default is not counted)', async () => {
    const messages = [{ role: 'user', content: words(900) }];
    expect((await send({ messages, max_tokens: 50 })).status).toBe(200);
    const sent = await send({ messages });
    expect(sent.status).toBe(200);
    expect(sent.upstreamCalls).toBe(1);
  });
});

describe('what the check costs', () => {
  it('is one comparison for a body whose bytes cannot make more tokens than the context length', () => {
    expect(mayExceedContext(900, 0, CONTEXT)).toBe(false);
    expect(mayExceedContext(900, 98, CONTEXT)).toBe(true);
    expect(mayExceedContext(1_000, 0, CONTEXT)).toBe(true);
  });

  it('whose bound holds: a prompt never counts more tokens than its body has bytes, plus 3 (property)', async () => {
    const message = fc.record({
      role: fc.constantFrom('system', 'user', 'assistant'),
      content: fc.oneof(fc.string({ unit: 'binary', maxLength: 300 }), fc.string({ maxLength: 300 })),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(message, { minLength: 1, maxLength: 5 }), async (messages) => {
        const bytes = Buffer.byteLength(JSON.stringify({ model: 'svc-fast', messages }));
        expect(await estimatePromptTokens(messages)).toBeLessThanOrEqual(bytes + 3);
      }),
      { numRuns: 100 },
    );
  }, 60_000);

  it('counts a prompt once: an estimate of its usage reuses a full count, never an extrapolated one', async () => {
    let counts = 0;
    const spy = {
      count: (count: (text: string) => number, text: string) => {
        counts += 1;
        return count(text);
      },
    };
    const messages = [{ role: 'user', content: words(2_000) }];
    const first = await estimatePromptTokens(messages, spy);
    expect(counts).toBe(1);
    expect(await estimatePromptTokens(messages, spy)).toBe(first);
    expect(counts).toBe(1);
    const cut = [{ role: 'user', content: words(3 * COUNT_SLICE) }];
    const limited = new CountBudget(Number.POSITIVE_INFINITY, Date.now, 10);
    await estimatePromptTokens(cut, limited);
    expect(limited.extrapolatedBytes).toBeGreaterThan(0);
    counts = 0;
    await estimatePromptTokens(cut, spy);
    expect(counts).toBe(1);
  });

  it('stops counting once past the context length (the rest estimated at the counted rate)', () => {
    let counted = 0;
    const count = (text: string) => {
      counted += text.length;
      return text.split(' ').length;
    };
    const text = words(3 * COUNT_SLICE);
    const tokens = new CountBudget(Number.POSITIVE_INFINITY, Date.now, CONTEXT).count(count, text);
    expect(counted).toBeLessThanOrEqual(COUNT_SLICE);
    expect(tokens).toBeGreaterThan(2.9 * COUNT_SLICE);
  });
});
