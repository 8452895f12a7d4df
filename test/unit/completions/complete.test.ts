import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  complete,
  PARSE_WHILE_READING_BYTES,
  takeChatRequest,
  takeSmallChatRequest,
} from '../../../functions/completions/complete.js';
import type { GenerationPorts } from '../../../functions/completions/config.js';
import { loadCompletionsConfig } from '../../../functions/completions/config.js';
import { authorize } from '../../../functions/core/access.js';
import { HttpError } from '../../../functions/core/errors.js';
import { usdToNano } from '../../../functions/core/money.js';
import { estimateTextTokens } from '../../../functions/core/tokens.js';
import type { FunctionUrlEvent } from '../../../functions/shared/http.js';
import { LARGE_REQUEST_BYTES } from '../../../functions/shared/memory.js';
import { logger } from '../../../functions/shared/observability.js';
import { loadCaller } from '../../../functions/shared/principal.js';
import { startSimulator } from '../../../functions/simulator/server.js';
import { sweepExpiredHolds } from '../../../functions/sweeper/sweep.js';
import { billLoggedGenerations } from '../../../lib/admin/usage-records.js';
import { accountWith } from '../../support/fixtures.js';
import { MemoryStore } from '../../support/memory-store.js';

/**
 * The request path of the completions function, unit-tested over an in-memory store (the port, not
 * DynamoDB) and the simulator: which store operations each kind of account costs, and that a hold is
 * always either settled or given back.
 */
let sim: Awaited<ReturnType<typeof startSimulator>>;
let config: ReturnType<typeof loadCompletionsConfig>;
beforeAll(async () => {
  sim = await startSimulator({ port: 0 });
  config = largeContext(
    loadCompletionsConfig({
      UPSTREAM_BASE_URL: sim.url,
      MAX_CONCURRENCY: '100',
      UPSTREAM_BUDGET_MS: '3000',
    }),
  );
});
afterAll(async () => {
  await sim?.close();
});

/**
 * Tiers whose context length takes the largest body a Function URL accepts (models with millions of
 * tokens of context exist): the tests of large requests here are about memory and estimates, not
 * about the context length (context-length.test.ts).
 */
function largeContext(loaded: ReturnType<typeof loadCompletionsConfig>) {
  for (const tier of Object.values(loaded.tiers)) tier.contextLength = 100_000_000;
  return loaded;
}

/** The store with its settlement write replaced (slowed, failing); everything else is the store's. */
function withSettleCharge(store: MemoryStore, settleCharge: MemoryStore['settleCharge']): MemoryStore {
  return Object.assign(Object.create(store) as MemoryStore, { settleCharge });
}

function event(key: string, body: Record<string, unknown>): FunctionUrlEvent {
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: '/api/v1/chat/completions',
    rawQueryString: '',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    requestContext: { http: { method: 'POST', path: '/api/v1/chat/completions' } },
    body: JSON.stringify(body),
    isBase64Encoded: false,
  } as unknown as FunctionUrlEvent;
}

/** What the handler does with an event: the authenticate middleware's steps, then the story. */
async function handleCompletion(
  event: FunctionUrlEvent,
  requestId: string,
  remainingMs: number,
  ports: GenerationPorts,
) {
  const principal = await loadCaller(ports.store, event.headers.authorization);
  const caller = authorize(principal, { requireCredit: true, topUpUrl: ports.config.topUpUrl });
  return complete(
    takeChatRequest(event),
    { caller, requestId, remainingMs, afterReply: (work) => settling.push(work) },
    ports,
  );
}

/** Settlements run after the reply (as the handler's afterReply plugin runs them): awaited here. */
const settling: Promise<void>[] = [];
const settled = () => Promise.all(settling.splice(0));

async function run(store: MemoryStore, key: string, body: Record<string, unknown>) {
  const result = await handleCompletion(event(key, body), 'req-1', 300_000, {
    store,
    config,
    credential: async () => undefined,
  });
  let text = '';
  if (typeof result.body === 'string') text = result.body;
  else for await (const part of result.body as Readable) text += part.toString();
  await settled();
  return { status: result.statusCode, text };
}

const ask = (stream: boolean, content = 'hello [[sim:tokens=6]]') => ({
  model: 'svc-fast',
  messages: [{ role: 'user', content }],
  stream,
});

describe('the body parsed while the key is read', () => {
  it('is taken early only when small: a large body waits for the caller (no parse for a bad key)', () => {
    const small = event('k', ask(false));
    expect(takeSmallChatRequest(small)).toMatchObject({ request: { model: 'svc-fast' } });
    expect(small.body).toBeUndefined();
    const large = event('k', ask(false, 'x'.repeat(PARSE_WHILE_READING_BYTES)));
    expect(takeSmallChatRequest(large)).toBeUndefined();
    expect(large.body?.length).toBeGreaterThan(PARSE_WHILE_READING_BYTES);
    expect(takeChatRequest(large)).toMatchObject({ request: { model: 'svc-fast' } });
  });
});

describe('a completion over the store port', () => {
  it.each([false, true])(
    'serves a funded account on one read and one settlement (stream %s)',
    async (stream) => {
      const store = new MemoryStore();
      const { accountId, key } = await accountWith(store, '1000');
      store.calls.length = 0;
      const { status } = await run(store, key, ask(stream));
      expect(status).toBe(200);
      expect(store.calls).toEqual(['loadPrincipal', 'settleCharge']);
      const [charge] = (await store.listLedger(accountId)).filter((e) => e.type === 'charge');
      const account = await store.getAccount(accountId);
      expect(usdToNano('1000') - (account?.balanceNano ?? 0n)).toBe(-(charge?.deltaNano ?? 1n));
    },
  );

  it.each([false, true])(
    'holds for a near-empty account and releases the hold in the settlement (stream %s)',
    async (stream) => {
      const store = new MemoryStore();
      const { accountId, key } = await accountWith(store, '0.05');
      store.calls.length = 0;
      expect((await run(store, key, ask(stream))).status).toBe(200);
      // The usage record goes onto the hold before the settlement: a function that dies leaves it there.
      expect(store.calls).toEqual(['loadPrincipal', 'placeHold', 'recordUsageOnHold', 'settleCharge']);
      expect(store.holds.size).toBe(0);
      expect((await store.getAccount(accountId))?.heldNano).toBe(0n);
    },
  );

  it.each([false, true])(
    "ends a held request's reply only once its hold is released: the caller's next request is not refused for it (stream %s)",
    async (stream) => {
      const store = new MemoryStore();
      // One request's worst case is more than the whole balance: its hold takes all the credit.
      const { accountId, key } = await accountWith(store, '0.0001');
      // A settlement that takes a while (DynamoDB's transaction round trip, stretched).
      const slow = withSettleCharge(store, async (...args) => {
        await new Promise((resolve) => setTimeout(resolve, 300));
        return store.settleCharge(...args);
      });
      const ports = { store: slow, config, credential: async () => undefined };
      // A sequential client: the whole reply, then at once its next request.
      const first = await handleCompletion(event(key, ask(stream)), 'req-1', 300_000, ports);
      if (typeof first.body !== 'string') for await (const _ of first.body as Readable);
      expect(store.holds.size).toBe(0);
      const second = await handleCompletion(event(key, ask(stream)), 'req-2', 300_000, ports).catch(
        (error: unknown) => error,
      );
      expect(second).toMatchObject({ statusCode: 200 });
      if (typeof (second as { body: unknown }).body !== 'string')
        for await (const _ of (second as { body: Readable }).body);
      await settled();
      expect((await store.listLedger(accountId)).filter((e) => e.type === 'charge')).toHaveLength(2);
      expect((await store.getAccount(accountId))?.heldNano).toBe(0n);
    },
  );

  it('gives a hold back when the upstream fails before anything is billed', async () => {
    const store = new MemoryStore();
    const { accountId, key } = await accountWith(store, '0.05');
    const failed = await run(store, key, ask(false, 'x [[sim:error=500]]')).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(HttpError);
    expect((failed as HttpError).statusCode).toBe(502);
    expect(store.calls).toContain('releaseHold');
    expect(store.holds.size).toBe(0);
    expect((await store.getAccount(accountId))?.heldNano).toBe(0n);
    expect((await store.listLedger(accountId)).filter((e) => e.type === 'charge')).toHaveLength(0);
  });

  it.each([
    ['committed, its answer lost (a database answering after the deadline)', true],
    ['not committed', false],
  ])('answers 503 when the hold write fails, and gives back a hold that was %s', async (_name, committed) => {
    const store = new MemoryStore();
    const { accountId, key } = await accountWith(store, '0.05');
    const lost = Object.assign(Object.create(store) as MemoryStore, {
      placeHold: async (hold: Parameters<MemoryStore['placeHold']>[0]) => {
        if (committed) await store.placeHold(hold);
        throw Object.assign(new Error('no answer within the deadline'), { name: 'TimeoutError' });
      },
    });
    const warned = vi.spyOn(logger, 'warn');
    try {
      const failed = await run(lost, key, ask(false)).catch((error: unknown) => error);
      expect((failed as HttpError).statusCode).toBe(503);
      await settled();
      // A late commit released is logged for the on-call (a sign of the database's latency).
      const released = warned.mock.calls.filter(
        ([message]) => message === 'hold written after its deadline released',
      );
      expect(released).toHaveLength(committed ? 1 : 0);
    } finally {
      warned.mockRestore();
    }
    expect(store.calls).toContain('releaseHold');
    // Nothing held, nothing billed, and nothing left for the sweeper to count as a request never billed.
    expect(store.holds.size).toBe(0);
    expect((await store.getAccount(accountId))?.heldNano).toBe(0n);
    expect((await store.listLedger(accountId)).filter((e) => e.type === 'charge')).toHaveLength(0);
    expect(await sweepExpiredHolds(store, Date.now() + 3_600_000)).toMatchObject({ released: 0 });
  });

  it('answers 402 saying the credit is held when a request in flight holds all of it', async () => {
    const store = new MemoryStore();
    const { accountId, key } = await accountWith(store, '0.01');
    await store.placeHold({
      accountId,
      holdId: 'gen-in-flight',
      amountNano: usdToNano('0.02'),
      expiresAt: Date.now() + 60_000,
      createdAt: new Date().toISOString(),
    });
    const refused = (await run(store, key, ask(false)).catch((error: unknown) => error)) as HttpError;
    expect(refused.statusCode).toBe(402);
    expect(refused.message).toMatch(/held by requests in flight/);
    expect(refused.toBody()).toMatchObject({ balance: 0.01 });
  });

  it.each([false, true])(
    'defers a failed settlement onto its hold; the sweeper bills it once, and bill-logged then finds it billed (stream %s)',
    async (stream) => {
      const store = new MemoryStore();
      const { accountId, key } = await accountWith(store, '0.05');
      // The settlement write fails (a database that refuses every transaction); the hold stays.
      const failing = withSettleCharge(store, async () => {
        throw new Error('TransactWriteItems failed');
      });
      const logged = vi.spyOn(logger, 'info');
      try {
        const { status, text } = await run(failing, key, ask(stream));
        expect(status).toBe(200);
        const [hold] = await store.listHolds(accountId);
        expect(hold?.deferred).toBe(true);
        const kept = JSON.parse(hold?.usageRecord ?? '{}') as { generationId?: string; billedNano?: string };
        expect(kept.generationId).toBe(hold?.holdId);
        expect(text).toContain(kept.generationId);
        // Deferred: the next sweep bills it, without waiting for the hold's expiry.
        const before = (await store.getAccount(accountId))?.balanceNano ?? 0n;
        expect(await sweepExpiredHolds(store)).toEqual({ examined: 1, released: 0, completed: 1 });
        expect(before - ((await store.getAccount(accountId))?.balanceNano ?? 0n)).toBe(
          BigInt(kept.billedNano ?? -1),
        );
        expect(await store.getAccount(accountId)).toMatchObject({ heldNano: 0n });
        // The function's own log line, given to bill-logged afterwards, changes nothing.
        const lines = logged.mock.calls
          .filter(([message]) => message === 'generation usage')
          .map(([message, fields]) => JSON.stringify({ message, ...(fields as object) }));
        expect(lines).toHaveLength(1);
        const billed = await billLoggedGenerations(store, lines.join('\n'));
        expect(billed).toMatchObject({ settled: [], alreadySettled: [kept.generationId], invalid: 0 });
      } finally {
        logged.mockRestore();
      }
    },
  );

  it('records the key id, the user and the finish reason on the ledger entry', async () => {
    const store = new MemoryStore();
    const { accountId, key } = await accountWith(store, '1000');
    await run(store, key, { ...ask(false), user: 'end-user-42' });
    const [charge] = (await store.listLedger(accountId)).filter((e) => e.type === 'charge');
    expect(charge?.keyId).toMatch(/^key_/);
    expect(charge?.user).toBe('end-user-42');
    expect(charge?.finishReason).toBe('stop');
  });
});

/** V8's collector, for measuring what stays reachable (vitest does not start workers with --expose-gc). */
function collector(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/**
 * An upstream that keeps nothing of a request: it reads the body to its end, sends the first chunk,
 * and finishes the stream when `finish` is called.
 */
async function discardingUpstream() {
  let finish = () => {};
  const chunk = (body: Record<string, unknown>) =>
    `data: ${JSON.stringify({ id: 'u', object: 'chat.completion.chunk', created: 1, model: 'm', ...body })}\n\n`;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(
        chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: 'Hi' }, finish_reason: null }] }),
      );
      finish = () => {
        res.write(chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }));
        res.write(
          chunk({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 1, total_tokens: 11 } }),
        );
        res.end('data: [DONE]\n\n');
      };
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, finish: () => finish(), close: () => server.close() };
}

describe('memory held while a reply streams', () => {
  it('keeps one copy of a large request (the parsed messages), not its raw body or its upstream JSON', async () => {
    const gc = collector();
    const upstream = await discardingUpstream();
    const store = new MemoryStore();
    const { key } = await accountWith(store, '1000');
    // 4M characters beyond Latin-1: 8 MiB per copy as a V8 string.
    const copy = 8 * 1024 * 1024;
    gc();
    const before = process.memoryUsage().heapUsed;
    const result = await handleCompletion(event(key, ask(true, '海'.repeat(copy / 2))), 'req-1', 300_000, {
      store,
      config: largeContext(
        loadCompletionsConfig({ UPSTREAM_BASE_URL: upstream.url, MAX_CONCURRENCY: '100' }),
      ),
      credential: async () => undefined,
    });
    const stream = result.body as Readable;
    await new Promise((resolve) => stream.once('readable', resolve));
    gc();
    const held = process.memoryUsage().heapUsed - before;
    upstream.finish();
    let text = '';
    for await (const part of stream) text += part.toString();
    await settled();
    upstream.close();
    expect(text).toContain('data: [DONE]');
    // The parsed content is needed (an estimate counts it). The event's body and the upstream
    // request's JSON were held as well before: three copies.
    expect(held).toBeGreaterThan(copy * 0.9);
    expect(held).toBeLessThan(copy * 1.5);
  }, 60_000);
});

/**
 * An upstream that keeps nothing of a request and reports no usage (so the gateway estimates it): a
 * JSON reply, or a stream of one chunk.
 */
async function unreportingUpstream() {
  const server = createServer((req, res) => {
    const stream = req.headers.accept === 'text/event-stream';
    req.resume();
    req.on('end', () => {
      const envelope = { id: 'u', created: 1, model: 'm' };
      if (!stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            ...envelope,
            object: 'chat.completion',
            choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' }, finish_reason: 'stop' }],
          }),
        );
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (choice: object) =>
        `data: ${JSON.stringify({ ...envelope, object: 'chat.completion.chunk', choices: [{ index: 0, ...choice }] })}\n\n`;
      res.end(
        chunk({ delta: { role: 'assistant', content: 'Hi' }, finish_reason: null }) +
          chunk({ delta: {}, finish_reason: 'stop' }) +
          'data: [DONE]\n\n',
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => server.close() };
}

/** Prose beyond Latin-1 (two bytes a character as a V8 string) of at least `bytes` UTF-8 bytes. */
const largeProse = (bytes: number) =>
  'The sea rolls on → the boats come home. '.repeat(Math.ceil(bytes / 42));

/**
 * A completion of a large request (largeProse), its reply read to its end. Its own function, so that
 * nothing of the test holds the request's text or the reply (a stream holds its relay, and the relay
 * its generation) once it returns.
 */
async function largeCompletion(store: MemoryStore, key: string, stream: boolean, upstreamUrl: string) {
  const result = await handleCompletion(largeEvent(key, stream), 'req-1', 300_000, {
    store,
    config: largeContext(loadCompletionsConfig({ UPSTREAM_BASE_URL: upstreamUrl, MAX_CONCURRENCY: '100' })),
    credential: async () => undefined,
  });
  let text = '';
  if (typeof result.body === 'string') text = result.body;
  else for await (const part of result.body as Readable) text += part.toString();
  return text;
}

function largeEvent(key: string, stream: boolean): FunctionUrlEvent {
  return event(key, ask(stream, largeProse(LARGE_REQUEST_BYTES)));
}

describe('memory of a large request', () => {
  // The tokenizer's tables, loaded by the first estimate, are not the request's.
  beforeAll(() => estimateTextTokens('warm up'));

  it.each([false, true])(
    'collects its copies once it is parsed and again before its prompt is counted, each time down to the parsed request (stream %s)',
    async (stream) => {
      const collect = collector();
      const upstream = await unreportingUpstream();
      const store = new MemoryStore();
      const { accountId, key } = await accountWith(store, '1000');
      const copy = largeProse(LARGE_REQUEST_BYTES).length * 2;
      collect();
      const before = process.memoryUsage().heapUsed;
      const held: number[] = [];
      const global = globalThis as { gc?: () => void };
      // Collections on the way call V8's exposed collector (Lambda starts node with --expose-gc).
      global.gc = () => {
        collect();
        held.push(process.memoryUsage().heapUsed - before);
      };
      try {
        await largeCompletion(store, key, stream, upstream.url);
        await settled();
      } finally {
        delete global.gc;
        upstream.close();
      }
      // Down to the parsed request each time: after the parse, the event's body is gone; before the
      // count, the upstream request's JSON and what writing it copied.
      expect(held).toHaveLength(2);
      for (const bytes of held) {
        expect(bytes).toBeGreaterThan(copy * 0.8);
        expect(bytes).toBeLessThan(copy * 1.5);
      }
      const [charge] = (await store.listLedger(accountId)).filter((entry) => entry.type === 'charge');
      expect(charge).toMatchObject({ estimated: true });
    },
    60_000,
  );

  it.each([false, true])(
    'is released once its reply is made, while the settlement is still being written (stream %s)',
    async (stream) => {
      const collect = collector();
      const upstream = await unreportingUpstream();
      const store = new MemoryStore();
      const { key } = await accountWith(store, '1000');
      let write = () => {};
      const slow = withSettleCharge(store, async (...args) => {
        await new Promise<void>((resolve) => {
          write = resolve;
        });
        return store.settleCharge(...args);
      });
      const copy = largeProse(LARGE_REQUEST_BYTES).length * 2;
      collect();
      const before = process.memoryUsage().heapUsed;
      try {
        const text = await largeCompletion(slow, key, stream, upstream.url);
        expect(text).toContain('"usage"');
        // Where the function's end-of-invocation collection runs (shared/memory.ts): the reply is made,
        // the ledger write is not done.
        expect(store.calls).not.toContain('settleCharge');
        collect();
        expect(process.memoryUsage().heapUsed - before).toBeLessThan(copy * 0.3);
      } finally {
        write();
        await settled();
        upstream.close();
      }
      expect(store.calls).toContain('settleCharge');
    },
    60_000,
  );
});
