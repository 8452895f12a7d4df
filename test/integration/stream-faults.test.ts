import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usdToNano } from '../../functions/core/money.js';
import { ledgerOf } from '../support/settled.js';
import { eventually, readSse } from '../support/sse.js';
import { balanceNano, newAccount, startTarget, type Target } from '../support/target.js';

/**
 * Streams that hold when things go wrong, driven through the emulator with the simulator's
 * directives. Each case checks what the client saw AND the ledger and balance afterwards.
 */
let target: Target;
beforeAll(async () => {
  target = await startTarget({
    env: {
      KEEPALIVE_INTERVAL_MS: '200',
      UPSTREAM_FIRST_BYTE_TIMEOUT_MS: '700',
      UPSTREAM_IDLE_TIMEOUT_MS: '1500',
    },
  });
});
afterAll(async () => {
  await target?.stop();
});

const START = 5_000_000_000n;

async function call(
  key: string,
  content: string,
  extra: Record<string, unknown> = {},
  signal?: AbortSignal,
  acceptEncoding = 'gzip, deflate',
) {
  return fetch(`${target.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      'accept-encoding': acceptEncoding,
    },
    body: JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content }], ...extra }),
    ...(signal ? { signal } : {}),
  });
}

/** Exactly one charge, and the balance dropped by exactly its billed cost. */
async function expectOneCharge(accountId: string) {
  const charges = (await ledgerOf(target, accountId)).filter((e) => e.type === 'charge');
  expect(charges).toHaveLength(1);
  const [charge] = charges;
  if (!charge) throw new Error('no charge');
  expect(START - (await balanceNano(target, accountId))).toBe(-charge.deltaNano);
  return charge;
}

async function expectNoCharge(accountId: string) {
  expect((await ledgerOf(target, accountId)).filter((e) => e.type === 'charge')).toHaveLength(0);
  expect(await balanceNano(target, accountId)).toBe(START);
}

describe('upstream failures before the first byte', () => {
  it.each([
    ['an upstream 500', '[[sim:error=500]]', false],
    ['an upstream 503 on a stream', '[[sim:error=503]]', true],
    ['an upstream 429', '[[sim:error=429]]', false],
    ['no response within the first-byte timeout', '[[sim:first_byte_delay_ms=2000]]', true],
  ])('answer 502 for %s, charging nothing', async (_name, directive, stream) => {
    const { accountId, key } = await newAccount(target);
    const response = await call(key, `hi ${directive}`, { stream });
    expect(response.status).toBe(502);
    const body = (await response.json()) as { error: { type: string; message: string } };
    expect(body.error.type).toBe('upstream_error');
    expect(body.error.message).not.toMatch(/simulator|127\.0\.0\.1/);
    await expectNoCharge(accountId);
  });

  it("passes an upstream 400 through as 400 with the upstream's message", async () => {
    const { accountId, key } = await newAccount(target);
    const response = await call(key, 'hi [[sim:error=400]]', { stream: true });
    expect(response.status).toBe(400);
    const body = (await response.json()) as { error: { message: string } };
    expect(body.error.message).toContain('maximum context length');
    await expectNoCharge(accountId);
  });
});

describe('upstream failures after the first byte', () => {
  it.each([
    ['a dropped connection', '[[sim:tokens=10]] [[sim:delay_ms=20]] [[sim:cut_after=4]]'],
    ['a malformed chunk', '[[sim:tokens=10]] [[sim:malformed_after=4]]'],
    ['an idle upstream', '[[sim:tokens=3]] [[sim:pause_after=1]] [[sim:pause_ms=2500]]'],
  ])(
    'end the stream with one error event and bill an estimate of what was generated, for %s',
    async (_name, directives) => {
      const { accountId, key } = await newAccount(target);
      const response = await call(key, `go ${directives}`, { stream: true });
      expect(response.status).toBe(200);
      const { data } = await readSse(response);
      // The error event, then [DONE]: a stream always ends with it (naive SSE readers wait for it).
      expect(data.at(-1)).toBe('[DONE]');
      expect(data.filter((d) => d === '[DONE]')).toHaveLength(1);
      const last = JSON.parse(data.at(-2) ?? '{}');
      expect(last.object).toBe('chat.completion.chunk');
      expect(last.choices[0].finish_reason).toBe('error');
      expect(last.error.message).toBeTruthy();
      expect(data.slice(0, -1).filter((d) => JSON.parse(d).error)).toHaveLength(1);
      const charge = await expectOneCharge(accountId);
      expect(charge.estimated).toBe(true);
      expect(charge.deltaNano).toBeLessThan(0n);
      expect(usdToNano(String(last.usage.cost))).toBe(-charge.deltaNano);
    },
  );

  it('answers 502 for a non-streaming request whose upstream dies mid-body, charging nothing it did not report', async () => {
    const { accountId, key } = await newAccount(target);
    const response = await call(key, 'go [[sim:cut_after=1]]');
    expect(response.status).toBe(502);
    await expectNoCharge(accountId);
  });
});

describe('a client that goes away', () => {
  // gzip: the relay's compressor is freed with the client's stream; the relay reads on and settles.
  it.each([
    ['gzip', 'gzip, deflate'],
    [null, 'identity'],
  ])(
    'still reads the generation to its end and bills the full upstream usage once (encoding %s)',
    async (encoding, acceptEncoding) => {
      const { accountId, key } = await newAccount(target);
      const controller = new AbortController();
      const response = await call(
        key,
        'long [[sim:tokens=20]] [[sim:delay_ms=30]]',
        { stream: true },
        controller.signal,
        acceptEncoding,
      );
      expect(response.headers.get('content-encoding')).toBe(encoding);
      const reader = response.body?.getReader();
      const first = await reader?.read();
      expect(first?.done).toBe(false);
      controller.abort();
      const charge = await eventually(async () =>
        (await ledgerOf(target, accountId)).find((e) => e.type === 'charge'),
      );
      expect(charge.estimated).toBe(false);
      expect(charge.completionTokens).toBe(20);
      await expectOneCharge(accountId);
      // The next stream (which may take the compressor the dropped one left, reset) is whole: it
      // decodes to its own events only, to [DONE].
      const next = await readSse(
        await call(key, 'next [[sim:tokens=3]]', { stream: true }, undefined, acceptEncoding),
      );
      expect(next.broken).toBe(false);
      expect(next.data.at(-1)).toBe('[DONE]');
      const chunks = next.data.slice(0, -1).map((d) => JSON.parse(d) as { id: string });
      expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
      expect(chunks[0]?.id).not.toBe(charge.entryId);
    },
  );
});

describe('a slow upstream', () => {
  it('keeps the client connection busy with SSE comments during a pause after the first chunk', async () => {
    const { accountId, key } = await newAccount(target);
    const response = await call(key, 'slow [[sim:tokens=3]] [[sim:pause_after=1]] [[sim:pause_ms=1000]]', {
      stream: true,
    });
    expect(response.status).toBe(200);
    const { raw, data } = await readSse(response);
    const afterFirstData = raw.slice(raw.indexOf('data: '));
    const betweenChunks = afterFirstData.slice(0, afterFirstData.indexOf('data: ', 6));
    // A 1000 ms pause with a 200 ms keep-alive interval: comments keep flowing mid-stream.
    expect(betweenChunks.match(/^: keep-alive$/gm)?.length ?? 0).toBeGreaterThanOrEqual(3);
    expect(data.at(-1)).toBe('[DONE]');
    await expectOneCharge(accountId);
  });

  it('commits to a live event stream whose first token is slower than the first-byte timeout', async () => {
    const { accountId, key } = await newAccount(target);
    const started = Date.now();
    const response = await call(key, 'slow [[sim:tokens=2]] [[sim:delay_ms=1000]]', { stream: true });
    // The status comes at the first-byte timeout (700 ms here), then keep-alives until the first token.
    expect(response.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(1_400);
    const { raw, data } = await readSse(response);
    expect(raw.slice(0, raw.indexOf('data: ')).match(/^: keep-alive$/gm)?.length ?? 0).toBeGreaterThanOrEqual(
      2,
    );
    expect(data.at(-1)).toBe('[DONE]');
    await expectOneCharge(accountId);
  });
});

describe('usage in every shape providers send', () => {
  it.each([
    ['a usage-only final chunk', '', false],
    ['usage on the last chunk that still has choices', '[[sim:usage_on_last_chunk]]', false],
    ['no usage at all', '[[sim:no_usage]]', true],
  ])(
    'gives the usage with cost once, on the last chunk (the finish), then [DONE], for %s',
    async (_name, directive, estimated) => {
      const { accountId, key } = await newAccount(target);
      const { data } = await readSse(await call(key, `go [[sim:tokens=6]] ${directive}`, { stream: true }));
      expect(data.at(-1)).toBe('[DONE]');
      const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
      const withUsage = chunks.filter((c) => c.usage);
      expect(withUsage).toHaveLength(1);
      expect(chunks.at(-1)).toBe(withUsage[0]);
      // The client did not ask for include_usage: the usage rides on the finish chunk.
      expect(chunks.at(-1).choices[0].finish_reason).toBe('stop');
      expect(chunks.at(-1).usage.completion_tokens).toBe(6);
      const charge = await expectOneCharge(accountId);
      expect(charge.estimated).toBe(estimated);
      expect(usdToNano(String(chunks.at(-1).usage.cost))).toBe(-charge.deltaNano);
    },
  );
});

describe('tool calls', () => {
  it('stream through intact with finish_reason tool_calls', async () => {
    const { accountId, key } = await newAccount(target);
    const tools = [
      {
        type: 'function',
        function: {
          name: 'lookup',
          parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
        },
      },
    ];
    const { data } = await readSse(await call(key, 'find it', { stream: true, tools }));
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    const calls = chunks.flatMap((c) => c.choices?.[0]?.delta?.tool_calls ?? []);
    expect(calls[0]).toMatchObject({
      index: 0,
      type: 'function',
      function: { name: 'lookup', arguments: '' },
    });
    expect(calls[0].id).toMatch(/^call_/);
    expect(
      JSON.parse(calls.map((c: { function: { arguments: string } }) => c.function.arguments).join('')),
    ).toEqual({ q: 'example' });
    expect(chunks.find((c) => c.choices?.[0]?.finish_reason)?.choices[0].finish_reason).toBe('tool_calls');
    await expectOneCharge(accountId);
  });
});
