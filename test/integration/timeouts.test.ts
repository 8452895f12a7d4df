import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usdToNano } from '../../functions/core/money.js';
import { ledgerOf } from '../support/settled.js';
import { balanceNano, newAccount, startTarget, type Target } from '../support/target.js';

/**
 * The limits on the path, with every interval shortened and the ratios kept (docs/timeouts.md):
 * keep-alive 200 ms against a stand-in for CloudFront's 60 s origin read timeout of 800 ms; a JSON
 * reply deadline of 1.5 s. The function deadline is in deadline.test.ts (its own function configuration).
 */
let target: Target;
const KEEPALIVE_MS = 200;
const ORIGIN_READ_TIMEOUT_MS = 800;
const START = 5_000_000_000n;

beforeAll(async () => {
  target = await startTarget({
    env: {
      KEEPALIVE_INTERVAL_MS: String(KEEPALIVE_MS),
      UPSTREAM_IDLE_TIMEOUT_MS: '5000',
      JSON_REPLY_TIMEOUT_MS: '1500',
    },
  });
});
afterAll(async () => {
  await target?.stop();
});

async function call(key: string, content: string, stream: boolean) {
  return fetch(`${target.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content }], stream }),
  });
}

/** Reads a response body, recording the longest silence between two reads (what CloudFront times). */
async function readTimed(response: Response) {
  const reader = response.body?.getReader();
  if (!reader) throw new Error('no body');
  const decoder = new TextDecoder();
  let text = '';
  let last = Date.now();
  let longestGap = 0;
  for (;;) {
    const { done, value } = await reader.read();
    const now = Date.now();
    if (done) break;
    longestGap = Math.max(longestGap, now - last);
    last = now;
    text += decoder.decode(value, { stream: true });
  }
  const data = text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
  return { text, data, longestGap };
}

async function charges(accountId: string) {
  return (await ledgerOf(target, accountId)).filter((e) => e.type === 'charge');
}

describe('a long mid-stream pause', () => {
  it('never leaves the client without a byte for as long as the origin read timeout, and is billed once', async () => {
    const { accountId, key } = await newAccount(target);
    // 6 keep-alive intervals of upstream silence: 90 s against CloudFront's 60 s, at 15 s keep-alives.
    const response = await call(
      key,
      'think [[sim:tokens=4]] [[sim:pause_after=1]] [[sim:pause_ms=1200]]',
      true,
    );
    expect(response.status).toBe(200);
    const { data, longestGap } = await readTimed(response);
    expect(longestGap).toBeLessThan(ORIGIN_READ_TIMEOUT_MS);
    expect(data.at(-1)).toBe('[DONE]');
    const [charge, ...more] = await charges(accountId);
    expect(more).toHaveLength(0);
    expect(charge?.estimated).toBe(false);
    const usage = JSON.parse(data.at(-2) ?? '{}').usage;
    expect(START - (await balanceNano(target, accountId))).toBe(usdToNano(String(usage.cost)));
  });
});

describe('a stream: false request and the JSON reply deadline', () => {
  it('is answered and billed when the upstream finishes before the deadline', async () => {
    const { accountId, key } = await newAccount(target);
    const response = await call(key, 'slow [[sim:tokens=3]] [[sim:first_byte_delay_ms=900]]', false);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { usage: { cost: number } };
    expect(await charges(accountId)).toHaveLength(1);
    expect(START - (await balanceNano(target, accountId))).toBe(usdToNano(String(body.usage.cost)));
  });

  it.each([
    ['headers', '[[sim:first_byte_delay_ms=2500]]'],
    ['body', '[[sim:delay_ms=2500]]'],
  ])(
    'is a 504 at the deadline with nothing charged when the upstream %s come later',
    async (_what, directive) => {
      const { accountId, key } = await newAccount(target);
      const started = Date.now();
      const response = await call(key, `slow [[sim:tokens=3]] ${directive}`, false);
      const elapsed = Date.now() - started;
      expect(response.status).toBe(504);
      expect(response.headers.get('x-should-retry')).toBe('false');
      const body = (await response.json()) as { error: { type: string; message: string } };
      expect(body.error.type).toBe('timeout');
      expect(body.error.message).toMatch(/stream/);
      expect(elapsed).toBeGreaterThanOrEqual(1_400);
      expect(elapsed).toBeLessThan(2_400);
      await new Promise((resolve) => setTimeout(resolve, 1_500)); // let the upstream finish its reply
      expect(await charges(accountId)).toHaveLength(0);
      expect(await balanceNano(target, accountId)).toBe(START);
    },
  );
});
