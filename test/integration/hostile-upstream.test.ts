import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAP_MARGIN } from '../../functions/billing/usage-bounds.js';
import { usdToNano } from '../../functions/core/money.js';
import { SIMULATOR_PRICES } from '../../functions/core/tiers.js';
import { usageAdjustments } from '../../functions/shared/observability.js';
import { startSimulator } from '../../functions/simulator/server.js';
import { inProcessLauncher } from '../../lib/local/emulator.js';
import { type FakeUpstream, startFakeUpstream } from '../support/fake-upstream.js';
import { ledgerOf } from '../support/settled.js';
import { readSse } from '../support/sse.js';
import { balanceNano, newAccount, startTarget, type Target } from '../support/target.js';
import {
  awkwardPieces,
  TWO_FINISH_BILLED_NANO,
  TWO_FINISH_COST,
  TWO_FINISH_TOKENS,
  twoFinishJson,
  twoFinishStream,
  writeInPieces,
} from '../support/two-finish-stream.js';
import {
  hostileUpstreamEnv,
  oneChargeItem,
  postCompletion,
  upstreamCompletion,
} from '../support/upstream-replies.js';

/**
 * An upstream that lies or sends garbage, driven through the emulator against DynamoDB Local: every
 * case checks what the client saw, the ledger entry (flagged when the usage was not billed as
 * reported) and the balance. svc-fast and svc-heavy go to the hostile upstream alone; svc-pro tries it
 * first and falls back to the simulator.
 */
type Behaviour = (body: Record<string, unknown>, res: ServerResponse) => void;
let behave: Behaviour;
let hostile: FakeUpstream;
let sim: Awaited<ReturnType<typeof startSimulator>>;
let target: Target;

const REPLY = 'This reply is exactly 33 bytes.!!';
const START = 5_000_000_000n;

beforeAll(async () => {
  hostile = await startFakeUpstream((body, res) => behave(body, res));
  const hostileUrl = hostile.url;
  sim = await startSimulator({ port: 0 });
  const tiers = {
    'svc-fast': [{ baseUrl: hostileUrl, model: 'liar', prices: SIMULATOR_PRICES['svc-fast'] }],
    'svc-pro': [
      { baseUrl: hostileUrl, model: 'liar', prices: SIMULATOR_PRICES['svc-pro'] },
      { baseUrl: sim.url, model: 'sim-pro', prices: SIMULATOR_PRICES['svc-pro'] },
    ],
    'svc-heavy': [
      { baseUrl: hostileUrl, model: 'liar', prices: SIMULATOR_PRICES['svc-heavy'], reportsCost: true },
    ],
  };
  // The functions run in this thread (inProcessLauncher): the tests read their metric counters.
  target = await startTarget({
    launcher: inProcessLauncher,
    env: hostileUpstreamEnv(tiers),
  });
});
afterAll(async () => {
  await target?.stop();
  await sim?.close();
  await hostile?.close();
});

const envelope = { id: 'up-1', object: 'chat.completion.chunk', created: 1, model: 'liar' };
const event = (content: string) =>
  `data: ${JSON.stringify({ ...envelope, choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;

/** Answers JSON or SSE (per the request) with the reply and the given usage. */
function lyingUsage(usage: unknown): Behaviour {
  return (body, res) => {
    if (!body.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end(JSON.stringify(upstreamCompletion('liar', REPLY, usage)));
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const piece of [REPLY.slice(0, 10), REPLY.slice(10)]) res.write(event(piece));
    res.write(
      `data: ${JSON.stringify({ ...envelope, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`,
    );
    res.write(`data: ${JSON.stringify({ ...envelope, choices: [], usage })}\n\n`);
    res.end('data: [DONE]\n\n');
  };
}

const call = (key: string, model: string, stream: boolean, extra: Record<string, unknown> = {}) =>
  postCompletion(target, key, model, stream, extra);

/** The client's usage block, from a JSON body or the last chunk of a stream (its finish chunk). */
async function clientUsage(response: Response, stream: boolean) {
  if (!stream) return ((await response.json()) as { usage: Record<string, number> }).usage;
  const { data } = await readSse(response);
  expect(data.at(-1)).toBe('[DONE]');
  return JSON.parse(data.at(-2) ?? '{}').usage as Record<string, number>;
}

/** The account's one charge (the balance down by exactly it) and the adjustment its ledger item records. */
async function oneCharge(accountId: string) {
  const { charge, item } = await oneChargeItem(target, accountId, START);
  return { charge, item, adjusted: item?.usageAdjusted?.S };
}

async function noCharge(accountId: string) {
  expect((await ledgerOf(target, accountId)).filter((e) => e.type === 'charge')).toHaveLength(0);
  expect(await balanceNano(target, accountId)).toBe(START);
}

describe('usage an upstream misreports is billed within its bound, flagged and counted', () => {
  it.each([false, true])(
    '1e12 completion tokens for a 33-byte reply with max_tokens 16 (stream %s)',
    async (stream) => {
      behave = lyingUsage({ prompt_tokens: 10, completion_tokens: 1e12, total_tokens: 1e12 + 10 });
      const { accountId, key } = await newAccount(target);
      const before = usageAdjustments.count;
      const response = await call(key, 'svc-fast', stream, { max_tokens: 16 });
      expect(response.status).toBe(200);
      const usage = await clientUsage(response, stream);
      expect(usage.completion_tokens).toBe(16 + CAP_MARGIN);
      // 32 tokens of svc-fast output at $1.43 per million, rounded up: far from $1.43 million.
      expect(usdToNano(String(usage.cost))).toBeLessThan(100_000n);
      const { charge, adjusted } = await oneCharge(accountId);
      expect(-charge.deltaNano).toBe(usdToNano(String(usage.cost)));
      expect(adjusted).toMatch(/completion_tokens 1000000000000 > bound/);
      expect(usageAdjustments.count - before).toBe(1);
    },
  );

  it.each([false, true])(
    'negative counts are not billed as sent: the estimate is (stream %s)',
    async (stream) => {
      behave = lyingUsage({ prompt_tokens: -500, completion_tokens: -7, total_tokens: -507 });
      const { accountId, key } = await newAccount(target);
      const before = usageAdjustments.count;
      const usage = await clientUsage(await call(key, 'svc-fast', stream), stream);
      expect(usage.prompt_tokens).toBeGreaterThan(0);
      expect(usage.completion_tokens).toBeGreaterThan(0);
      const { charge, adjusted } = await oneCharge(accountId);
      expect(charge.estimated).toBe(true);
      expect(adjusted).toMatch(/unusable usage report/);
      expect(usageAdjustments.count - before).toBe(1);
    },
  );

  it('cached tokens above the prompt are billed as at most the prompt', async () => {
    behave = lyingUsage({
      prompt_tokens: 20,
      completion_tokens: 5,
      total_tokens: 25,
      prompt_tokens_details: { cached_tokens: 5_000 },
    });
    const { accountId, key } = await newAccount(target);
    const usage = await clientUsage(await call(key, 'svc-fast', false), false);
    expect(usage.prompt_tokens).toBe(20);
    expect((usage.prompt_tokens_details as unknown as { cached_tokens: number }).cached_tokens).toBe(20);
    const { adjusted } = await oneCharge(accountId);
    expect(adjusted).toMatch(/cached_tokens 5000 > prompt_tokens 20/);
  });

  it('a reported cost 1000x the priced tokens is replaced by the price table', async () => {
    // 20 prompt + 5 completion tokens of svc-heavy cost about $0.0000245 at the table; report $0.0245.
    behave = lyingUsage({ prompt_tokens: 20, completion_tokens: 5, total_tokens: 25, cost: 0.0245 });
    const { accountId, key } = await newAccount(target);
    const usage = await clientUsage(await call(key, 'svc-heavy', false), false);
    const tableBilled = 20n * 780n + 5n * 3250n; // the spec's billed svc-heavy rates, in nano-USD per token
    expect(usdToNano(String(usage.cost))).toBeLessThanOrEqual(tableBilled + 1n);
    const { adjusted } = await oneCharge(accountId);
    expect(adjusted).toMatch(/cost 0.0245 > 3x the price table/);
  });

  it('an honest reported cost is billed as reported x 1.3', async () => {
    behave = lyingUsage({ prompt_tokens: 20, completion_tokens: 5, total_tokens: 25, cost: 0.00003 });
    const { accountId, key } = await newAccount(target);
    const usage = await clientUsage(await call(key, 'svc-heavy', false), false);
    expect(usdToNano(String(usage.cost))).toBe(39_000n);
    const { adjusted } = await oneCharge(accountId);
    expect(adjusted).toBeUndefined();
  });
});

describe('a cost reported on the second of two finish chunks (CRLF, comments, cut at awkward bytes)', () => {
  const behaviour: Behaviour = (body, res) => {
    if (!body.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end(twoFinishJson(REPLY));
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    void writeInPieces(res, awkwardPieces(twoFinishStream(REPLY)));
  };

  it.each([false, true])(
    'is billed 1.3x the reported cost, as its JSON reply is (stream %s)',
    async (stream) => {
      behave = behaviour;
      const { accountId, key } = await newAccount(target);
      // svc-heavy's table prices these tokens at about $0.000055: the reported $0.000123456 is plausible.
      const response = await call(key, 'svc-heavy', stream);
      expect(response.status).toBe(200);
      const usage = await clientUsage(response, stream);
      expect([usage.prompt_tokens, usage.completion_tokens]).toEqual([
        TWO_FINISH_TOKENS.prompt,
        TWO_FINISH_TOKENS.completion,
      ]);
      expect(usdToNano(String(usage.cost))).toBe(TWO_FINISH_BILLED_NANO);
      const { charge, item, adjusted } = await oneCharge(accountId);
      expect(-charge.deltaNano).toBe(TWO_FINISH_BILLED_NANO);
      expect(item?.upstreamCostUsd?.S).toBe(TWO_FINISH_COST);
      expect(adjusted).toBeUndefined();
    },
  );

  it.each([false, true])(
    "above 3x the tier's table it is not believed, stream and JSON alike: both billed by the table (stream %s)",
    async (stream) => {
      behave = behaviour;
      const { accountId, key } = await newAccount(target);
      // svc-fast's table prices these tokens at $0.0000243538: $0.000123456 is over 3x that + $0.00001.
      const usage = await clientUsage(await call(key, 'svc-fast', stream), stream);
      expect(usdToNano(String(usage.cost))).toBe(31_660n);
      const { charge, adjusted } = await oneCharge(accountId);
      expect(-charge.deltaNano).toBe(31_660n);
      expect(adjusted).toBe(`cost ${TWO_FINISH_COST} > 3x the price table`);
    },
  );
});

describe('usage details', () => {
  it.each([false, true])('pass through to the client, JSON and stream (stream %s)', async (stream) => {
    behave = lyingUsage({
      prompt_tokens: 20,
      completion_tokens: 9,
      total_tokens: 29,
      prompt_tokens_details: { cached_tokens: 4, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 3, accepted_prediction_tokens: 0 },
    });
    const { accountId, key } = await newAccount(target);
    const usage = await clientUsage(await call(key, 'svc-fast', stream), stream);
    expect(usage.prompt_tokens_details).toEqual({ cached_tokens: 4, audio_tokens: 0 });
    expect(usage.completion_tokens_details).toEqual({ reasoning_tokens: 3, accepted_prediction_tokens: 0 });
    const { charge, adjusted } = await oneCharge(accountId);
    expect(charge.cachedTokens).toBe(4);
    expect(adjusted).toBeUndefined();
  });
});

describe('a stream request answered with something other than an event stream', () => {
  const html: Behaviour = (_body, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<html><body>Gateway login</body></html>');
  };
  const choiceless: Behaviour = (_body, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'x',
        object: 'chat.completion',
        usage: { prompt_tokens: 3, completion_tokens: 0 },
      }),
    );
  };
  const sseWithoutChunk: Behaviour = (_body, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end('data: {"status":"ok"}\n\ndata: [DONE]\n\n');
  };

  it.each([
    ['an HTML page', html],
    ['a JSON body without choices', choiceless],
    ['an event stream whose first event is not a chunk', sseWithoutChunk],
  ])('is a 502 with nothing charged for %s', async (_name, behaviour) => {
    behave = behaviour;
    const { accountId, key } = await newAccount(target);
    const response = await call(key, 'svc-fast', true);
    expect(response.status).toBe(502);
    expect(((await response.json()) as { error: { type: string } }).error.type).toBe('upstream_error');
    await noCharge(accountId);
  });

  it('falls back to the next target when one is configured, billed once at its price', async () => {
    behave = html;
    const { accountId, key } = await newAccount(target);
    const response = await call(key, 'svc-pro', true);
    expect(response.status).toBe(200);
    const usage = await clientUsage(response, true);
    const { charge, adjusted } = await oneCharge(accountId);
    expect(-charge.deltaNano).toBe(usdToNano(String(usage.cost)));
    expect(adjusted).toBeUndefined();
  });
});

describe('an upstream that streams forever', () => {
  it('is cut at the output cap with finish_reason length, billed once at the bound, and hung up on', async () => {
    behave = (_body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const timer = setInterval(() => res.write(event('more words ')), 2);
      res.on('close', () => clearInterval(timer));
    };
    const { accountId, key } = await newAccount(target);
    const started = Date.now();
    const response = await call(key, 'svc-fast', true, { max_tokens: 20 });
    expect(response.status).toBe(200);
    const { data } = await readSse(response);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(data.at(-1)).toBe('[DONE]');
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    expect(chunks.at(-1).choices[0].finish_reason).toBe('length');
    const usage = chunks.at(-1).usage;
    expect(usage.completion_tokens).toBe(20 + CAP_MARGIN);
    const { charge, adjusted } = await oneCharge(accountId);
    expect(-charge.deltaNano).toBe(usdToNano(String(usage.cost)));
    expect(adjusted).toMatch(/output cap/);
    await hostile.lastClosed(); // the gateway hung up on the upstream
  });
});

/**
 * A svc-fast stream the upstream breaks off: answered 200, the text relayed, an error event with the
 * usage last and [DONE]; one charge, estimated and billed as that usage says.
 */
async function brokenStream() {
  const { accountId, key } = await newAccount(target);
  const response = await call(key, 'svc-fast', true);
  expect(response.status).toBe(200);
  const { data } = await readSse(response);
  expect(data.at(-1)).toBe('[DONE]');
  const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
  const text = chunks.map((c) => c.choices?.[0]?.delta?.content ?? '').join('');
  const last = chunks.at(-1);
  expect(last.choices[0].finish_reason).toBe('error');
  const { charge } = await oneCharge(accountId);
  expect(charge.estimated).toBe(true);
  expect(-charge.deltaNano).toBe(usdToNano(String(last.usage.cost)));
  return { chunks, text, last };
}

describe('an upstream that breaks its own HTTP framing', () => {
  it('mid-stream: what it sent is relayed and billed as delivered, then one error event and [DONE]', async () => {
    behave = (_body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(event('Two events '));
      // After them, a chunk size that is not one: nothing after it can be framed.
      res.write(event('arrive.'), () => res.socket?.write('zz\r\ndata: {"choices":[]}\r\n'));
    };
    const { chunks, text } = await brokenStream();
    expect(text).toBe('Two events arrive.');
    expect(chunks.filter((c) => c.error)).toHaveLength(1);
    await hostile.lastClosed(); // the gateway hung up on the upstream
  });

  it('in a JSON reply: a 502 with nothing charged', async () => {
    behave = (_body, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"id":"up-1",', () => res.socket?.write('zz\r\n'));
    };
    const { accountId, key } = await newAccount(target);
    const response = await call(key, 'svc-fast', false);
    expect(response.status).toBe(502);
    await noCharge(accountId);
    await hostile.lastClosed();
  });
});

// Here the function runs in this test's process, which also runs the upstream: it reads the whole burst
// in the event-loop pass before the upstream's reset. In a process of its own, a reset discards what the
// upstream's kernel had not yet sent past the receive window (test/integration/upstream-burst.test.ts).
describe('an upstream that bursts its whole stream and then resets the connection', () => {
  it('2,000 events in one write, then RST, read in the same process: every event is relayed and billed', async () => {
    const pieces = Array.from({ length: 2_000 }, (_, i) => ` e${i}`);
    behave = (_body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // Every event as its own chunk, all of them (and the head) leaving in one write, before the
      // gateway can have read any of it; then a reset (RST), not a close.
      res.socket?.cork();
      for (const piece of pieces) res.write(event(piece));
      res.socket?.uncork();
      res.write('', () => res.socket?.resetAndDestroy());
    };
    const { text, last } = await brokenStream();
    expect(text).toBe(pieces.join(''));
    expect(last.usage.completion_tokens).toBeGreaterThanOrEqual(2_000);
  });
});
