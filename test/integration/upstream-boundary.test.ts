import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { priceUsage } from '../../functions/billing/pricing.js';
import { CAP_MARGIN } from '../../functions/billing/usage-bounds.js';
import { usdToNano } from '../../functions/core/money.js';
import { parseTierConfig, SIMULATOR_PRICES } from '../../functions/core/tiers.js';
import { CountBudget, estimateTextTokens } from '../../functions/core/tokens.js';
import { usageAdjustments } from '../../functions/shared/observability.js';
import { inProcessLauncher } from '../../lib/local/emulator.js';
import { type FakeUpstream, startFakeUpstream } from '../support/fake-upstream.js';
import { ledgerOf } from '../support/settled.js';
import { readSse } from '../support/sse.js';
import { newAccount, startTarget, type Target } from '../support/target.js';
import { oneChargeItem, postCompletion, upstreamCompletion } from '../support/upstream-replies.js';

/**
 * The upstream boundary, tried as a hostile upstream and a hostile client would: every byte received
 * before a connection reset is relayed, every number from outside is bounded, what is billed is what
 * was delivered, private fields never reach the client, and no client string makes a 5xx. Driven
 * through the emulator against DynamoDB Local, with a fake upstream whose behaviour each test sets.
 */
type Behaviour = (body: Record<string, unknown>, res: ServerResponse) => void;
let behave: Behaviour;
let upstream: FakeUpstream;
let target: Target;

const START = 5_000_000_000n;
const TIERS = {
  'svc-fast': [{ baseUrl: '', model: 'fake', prices: SIMULATOR_PRICES['svc-fast'] }],
  'svc-pro': [{ baseUrl: '', model: 'fake', prices: SIMULATOR_PRICES['svc-pro'], extraFields: 'drop' }],
  'svc-heavy': [{ baseUrl: '', model: 'fake', prices: SIMULATOR_PRICES['svc-heavy'] }],
};

beforeAll(async () => {
  upstream = await startFakeUpstream((body, res) => behave(body, res));
  const tiers = Object.fromEntries(
    Object.entries(TIERS).map(([tier, targets]) => [
      tier,
      targets.map((t) => ({ ...t, baseUrl: upstream.url })),
    ]),
  );
  target = await startTarget({
    launcher: inProcessLauncher,
    env: {
      TIERS_CONFIG: JSON.stringify(tiers),
      UPSTREAM_RETRY_BASE_MS: '20',
      UPSTREAM_FIRST_BYTE_TIMEOUT_MS: '2000',
      KEEPALIVE_INTERVAL_MS: '200',
    },
  });
});
afterAll(async () => {
  await target?.stop();
  await upstream?.close();
});

const envelope = { id: 'up-1', object: 'chat.completion.chunk', created: 1, model: 'fake' };
const contentEvent = (content: string) =>
  `data: ${JSON.stringify({ ...envelope, choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;

const completion = (content: string, usage: unknown, extra: Record<string, unknown> = {}) =>
  upstreamCompletion('fake', content, usage, extra);

const call = (key: string, stream: boolean, extra: Record<string, unknown> = {}, model = 'svc-fast') =>
  postCompletion(target, key, model, stream, extra);

/** The one charge of an account, with the ledger item's token counts and flags; the balance agrees. */
async function oneCharge(accountId: string) {
  const { charge, item } = await oneChargeItem(target, accountId, START);
  return {
    billedNano: -charge.deltaNano,
    promptTokens: Number(item?.promptTokens?.N),
    completionTokens: Number(item?.completionTokens?.N),
    estimated: item?.estimated?.BOOL,
    adjusted: item?.usageAdjusted?.S,
  };
}

const tokensOf = (text: string) => estimateTextTokens(text, new CountBudget(Date.now() + 60_000));

/** The content a client received, and its last two data payloads. */
async function received(response: Response) {
  const { data } = await readSse(response);
  const chunks = data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d));
  const content = chunks.map((c) => c.choices?.[0]?.delta?.content ?? '').join('');
  return { data, chunks, content };
}

describe('an upstream that resets the connection mid-stream', () => {
  it.each([
    [10, 0],
    [500, 0],
    [2_000, 0],
    [12, 30],
  ])(
    'relays every event sent before the reset (%i events, %i ms apart), then the error and [DONE], billed on them',
    async (count, paceMs) => {
      const pieces = Array.from({ length: count }, (_, i) => ` w${i}`);
      behave = (_body, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        let i = 0;
        const next = () => {
          const last = i === pieces.length - 1;
          // The reset follows the last event once it has left for the socket.
          res.write(contentEvent(pieces[i] ?? ''), last ? () => res.socket?.resetAndDestroy() : undefined);
          i += 1;
          if (last) return;
          if (paceMs) setTimeout(next, paceMs);
          else next();
        };
        next();
      };
      const { accountId, key } = await newAccount(target);
      const response = await call(key, true);
      expect(response.status).toBe(200);
      const { data, chunks, content } = await received(response);
      expect(content).toBe(pieces.join(''));
      expect(data.at(-1)).toBe('[DONE]');
      const error = chunks.at(-1);
      expect(error.choices[0].finish_reason).toBe('error');
      expect(error.error.message).toMatch(/lost/);
      const charge = await oneCharge(accountId);
      expect(charge.estimated).toBe(true);
      expect(charge.completionTokens).toBe(await tokensOf(content));
      expect(error.usage.completion_tokens).toBe(charge.completionTokens);
    },
  );
});

describe('numbers from the upstream are bounded', () => {
  const hostileNumbers = [
    '0e999999999',
    '1e-9999999',
    `1${'0'.repeat(400)}`,
    '-0',
    '"NaN"',
    '"Infinity"',
    '1e400',
  ];
  /** A usage with `cost` (or a count) written as the given raw JSON number text. */
  const rawUsage = (field: 'cost' | 'completion_tokens', value: string) =>
    field === 'cost'
      ? `{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"cost":${value}}`
      : `{"prompt_tokens":10,"completion_tokens":${value},"total_tokens":15}`;
  const answerWith =
    (usage: string): Behaviour =>
    (body, res) => {
      if (!body.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end(
          JSON.stringify(completion('Five words of reply text.', null)).replace(
            '"usage":null',
            `"usage":${usage}`,
          ),
        );
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(contentEvent('Five words of reply text.'));
      res.write(
        `data: {"id":"up-1","object":"chat.completion.chunk","created":1,"model":"fake","choices":[],"usage":${usage}}\n\n`,
      );
      res.end('data: [DONE]\n\n');
    };

  it.each(hostileNumbers.flatMap((value) => [false, true].map((stream) => [value, stream] as const)))(
    'usage.cost %s (stream %s): billed by our prices, flagged, counted, in bounded time',
    async (value, stream) => {
      behave = answerWith(rawUsage('cost', value));
      const { accountId, key } = await newAccount(target);
      const before = usageAdjustments.count;
      const started = Date.now();
      const response = await call(key, stream);
      expect(response.status).toBe(200);
      if (stream) expect((await readSse(response)).data.at(-1)).toBe('[DONE]');
      else await response.json();
      expect(Date.now() - started).toBeLessThan(1_000);
      const charge = await oneCharge(accountId);
      const prices = parseTierConfig(TIERS_WITH_URL())['svc-fast'].targets[0];
      if (!prices) throw new Error('no target');
      const table = priceUsage(
        { promptTokens: 10, completionTokens: 5, cachedTokens: 0 },
        { ...prices, reportsCost: false },
      );
      expect(charge.billedNano).toBe(table.billedNano);
      expect(charge.adjusted).toMatch(/usage\.cost .* not a bounded decimal/);
      expect(usageAdjustments.count - before).toBe(1);
    },
  );

  it.each(hostileNumbers.flatMap((value) => [false, true].map((stream) => [value, stream] as const)))(
    'completion_tokens %s (stream %s): estimated by us, flagged, counted, in bounded time',
    async (value, stream) => {
      behave = answerWith(rawUsage('completion_tokens', value));
      const { accountId, key } = await newAccount(target);
      const before = usageAdjustments.count;
      const started = Date.now();
      const response = await call(key, stream);
      expect(response.status).toBe(200);
      if (stream) await readSse(response);
      else await response.json();
      expect(Date.now() - started).toBeLessThan(1_000);
      const charge = await oneCharge(accountId);
      expect(charge.estimated).toBe(true);
      expect(charge.completionTokens).toBe(await tokensOf('Five words of reply text.'));
      expect(charge.adjusted).toMatch(/unusable usage report/);
      expect(usageAdjustments.count - before).toBe(1);
    },
  );

  it('keeps serving after all of them', async () => {
    behave = answerWith('{"prompt_tokens":100,"completion_tokens":100,"total_tokens":200,"cost":0.0001}');
    const { accountId, key } = await newAccount(target);
    const response = await call(key, false);
    expect(response.status).toBe(200);
    // 1.3 x $0.0001, reported by the upstream, billed as the price rule says.
    expect((await oneCharge(accountId)).billedNano).toBe(130_000n);
  });
});

const TIERS_WITH_URL = () =>
  Object.fromEntries(
    Object.entries(TIERS).map(([tier, targets]) => [
      tier,
      targets.map((t) => ({ ...t, baseUrl: upstream.url })),
    ]),
  );

describe('only the upstream usage.cost is its cost, and only documented fields reach the client', () => {
  const privateFields = {
    provider: { name: 'SecretCloud', cost: 0 },
    x_upstream_internal: { node: 'gpu-17' },
  };

  it.each([false, true])(
    'a "cost" outside usage is ignored; private fields are dropped (stream %s)',
    async (stream) => {
      behave = (body, res) => {
        // A reported cost is believed within 3x the price table (+ $0.00001): these counts allow it.
        const usage = { prompt_tokens: 100, completion_tokens: 100, total_tokens: 200, cost: 0.0001234 };
        if (!body.stream) {
          res.writeHead(200, { 'content-type': 'application/json' });
          const reply = completion('Hello there.', usage, privateFields);
          (reply.choices[0] as Record<string, unknown>).native_finish_reason = 'eos';
          (reply.choices[0]?.message as Record<string, unknown>).provider_data = 'secret';
          return void res.end(JSON.stringify(reply));
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(
          `data: ${JSON.stringify({ ...envelope, ...privateFields, choices: [{ index: 0, delta: { content: 'Hello there.', provider_data: 'secret' }, finish_reason: null, native_finish_reason: 'eos' }] })}\n\n`,
        );
        res.write(`data: ${JSON.stringify({ ...envelope, ...privateFields, choices: [], usage })}\n\n`);
        res.end('data: [DONE]\n\n');
      };
      const { accountId, key } = await newAccount(target);
      const response = await call(key, stream);
      expect(response.status).toBe(200);
      const text = stream ? (await readSse(response)).raw : JSON.stringify(await response.json());
      for (const secret of [
        'SecretCloud',
        'gpu-17',
        'x_upstream_internal',
        'provider',
        'native_finish_reason',
        'secret',
      ])
        expect(text).not.toContain(secret);
      // ceil(1.3 x 0.0001234 USD) in nano-USD: the cost inside usage, not the provider's 0.
      expect((await oneCharge(accountId)).billedNano).toBe(160_420n);
    },
  );

  it('an event past the output bound is neither delivered nor billed', async () => {
    behave = (_body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(contentEvent('Short start. '));
      res.write(contentEvent('z'.repeat(60_000)));
      res.write(
        `data: ${JSON.stringify({ ...envelope, choices: [], usage: { prompt_tokens: 10, completion_tokens: 8208, total_tokens: 8218 } })}\n\n`,
      );
      res.end('data: [DONE]\n\n');
    };
    const { accountId, key } = await newAccount(target);
    const { content, chunks } = await received(await call(key, true));
    expect(content).toBe('Short start. ');
    expect(chunks.some((c) => c.choices?.[0]?.finish_reason === 'length')).toBe(true);
    const charge = await oneCharge(accountId);
    expect(charge.completionTokens).toBe(await tokensOf('Short start. '));
  });

  it('a JSON reply is held to the output cap as a stream is: cut, length, billed as sent', async () => {
    const long = 'An upstream that ignores the cap keeps on talking. '.repeat(250);
    behave = (_body, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify(
          completion(long, { prompt_tokens: 10, completion_tokens: 3_000, total_tokens: 3_010 }),
        ),
      );
    };
    const { accountId, key } = await newAccount(target);
    const response = await call(key, false, { max_completion_tokens: 4 });
    expect(response.status).toBe(200);
    const reply = (await response.json()) as {
      choices: { message: { content: string }; finish_reason: string }[];
      usage: { completion_tokens: number; cost: number };
    };
    const sent = reply.choices[0]?.message.content ?? '';
    // (4 + 16) allowed tokens x 6 bytes: the bound streams are cut at.
    expect(Buffer.byteLength(sent)).toBeLessThanOrEqual(120);
    expect(long.startsWith(sent)).toBe(true);
    expect(reply.choices[0]?.finish_reason).toBe('length');
    const charge = await oneCharge(accountId);
    // Billed on the sent text, within the same bound as any usage (cap + 16).
    expect(charge.completionTokens).toBe(Math.min(await tokensOf(sent), 4 + CAP_MARGIN));
    expect(reply.usage.completion_tokens).toBe(charge.completionTokens);
    expect(usdToNano(String(reply.usage.cost))).toBe(charge.billedNano);
    expect(charge.adjusted).toMatch(/cut at the output cap/);
  });
});

describe("a client's own strings never make a 5xx", () => {
  beforeAll(() => {
    behave = (body, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify(
          completion(`ok ${String(body.model)}`, { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 }),
        ),
      );
    };
  });

  it('user values with an emoji at every cut position, lone surrogates, control characters and 10 KB', async () => {
    const { key } = await newAccount(target, '50');
    const users: string[] = [];
    for (let k = 0; k <= 258; k++) users.push(`${'u'.repeat(k)}😀tail`);
    users.push('\ud83d', `${'a'.repeat(255)}\ud83d`, 'ctl\u0000\u0007\r\n\t\u001b[31m', 'x'.repeat(10_240));
    const statuses = new Set<number>();
    for (const user of users) {
      const response = await call(key, false, { user });
      statuses.add(response.status);
      expect(response.status, JSON.stringify(user.slice(0, 80))).toBeLessThan(500);
      await response.arrayBuffer();
    }
    // Long values are refused as the client's mistake (400); the rest are served.
    expect([...statuses].sort()).toEqual([200, 400]);
  });

  it('extra field names with an emoji across the 64th unit, lone surrogates or controls, dropped for a target: named in the header, never a 5xx', async () => {
    const { key } = await newAccount(target, '50');
    const names = [
      ...Array.from({ length: 8 }, (_, i) => `${'f'.repeat(60 + i)}😀x`),
      `${'g'.repeat(63)}\ud83d`,
      'ctl\u0001\u001f',
    ];
    for (const name of names) {
      const response = await call(key, false, { [name]: 1 }, 'svc-pro');
      expect(response.status, JSON.stringify(name)).toBe(200);
      expect(response.headers.get('x-dropped-fields')).toBeTruthy();
      await response.arrayBuffer();
    }
  });
});

describe('the short form (UPSTREAM_BASE_URL) against a provider that reports its own cost', () => {
  let short: Target;
  beforeAll(async () => {
    short = await startTarget({ upstreamBaseUrl: upstream.url });
  });
  afterAll(async () => {
    await short?.stop();
  });

  it.each([false, true])('bills exactly 1.3 x the reported cost (stream %s)', async (stream) => {
    behave = (body, res) => {
      const usage = { prompt_tokens: 120, completion_tokens: 70, total_tokens: 190, cost: 0.000123456 };
      if (!body.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end(JSON.stringify(completion('Priced by the provider.', usage)));
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(contentEvent('Priced by the provider.'));
      res.write(`data: ${JSON.stringify({ ...envelope, choices: [], usage })}\n\n`);
      res.end('data: [DONE]\n\n');
    };
    const { accountId, key } = await newAccount(short);
    const response = await fetch(`${short.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'Hi' }], stream }),
    });
    expect(response.status).toBe(200);
    const cost = stream
      ? JSON.parse((await readSse(response)).data.at(-2) ?? '{}').usage.cost
      : ((await response.json()) as { usage: { cost: number } }).usage.cost;
    // 1.3 x 0.000123456 = 0.0001604928, rounded up to the next nano-USD.
    expect(String(cost)).toBe('0.000160493');
    const charges = (await ledgerOf(short, accountId)).filter((e) => e.type === 'charge');
    expect(charges.map((c) => -c.deltaNano)).toEqual([160_493n]);
  });
});
