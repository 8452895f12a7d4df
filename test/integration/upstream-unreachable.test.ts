import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../lib/local/dynamodb-local.js';
import { ledgerOf } from '../support/settled.js';
import { balanceNano, newAccount, startTarget, type Target } from '../support/target.js';

/** An upstream that refuses connections: 502 before any byte, and nothing charged. */
let target: Target;
beforeAll(async () => {
  target = await startTarget({ upstreamBaseUrl: `http://127.0.0.1:${await freePort()}/v1` });
});
afterAll(async () => {
  await target?.stop();
});

describe('a refused upstream connection', () => {
  it.each([false, true])('answers 502 (stream %s) and charges nothing', async (stream) => {
    const { accountId, key } = await newAccount(target);
    const response = await fetch(`${target.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }], stream }),
    });
    expect(response.status).toBe(502);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('upstream_error');
    expect(await ledgerOf(target, accountId)).toHaveLength(1); // the initial top-up only
    expect(await balanceNano(target, accountId)).toBe(5_000_000_000n);
  });
});
