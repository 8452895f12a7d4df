import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usdToNano } from '../../functions/core/money.js';
import { listLedger } from '../../lib/admin/operations.js';
import { readSse } from '../support/sse.js';
import { balanceNano, newAccount, startTarget, type Target } from '../support/target.js';

/** A generation longer than the function may run: it ends, settled, before Lambda would kill it. */
const START = 5_000_000_000n;

describe('a generation that would outlive the function', () => {
  let short: Target;
  beforeAll(async () => {
    // The emulator gives completions a 300 s timeout; a settlement reserve of 298 s leaves the relay 2 s.
    short = await startTarget({ env: { SETTLE_RESERVE_MS: '298000', KEEPALIVE_INTERVAL_MS: '200' } });
  });
  afterAll(async () => {
    await short?.stop();
  });

  it('ends before the deadline with a length finish, one usage chunk and [DONE], billed once', async () => {
    const { accountId, key } = await newAccount(short);
    const started = Date.now();
    const response = await fetch(`${short.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'svc-fast',
        messages: [{ role: 'user', content: 'long [[sim:tokens=200]] [[sim:delay_ms=50]]' }],
        stream: true,
      }),
    });
    const { data } = await readSse(response);
    expect(Date.now() - started).toBeLessThan(4_000);
    expect(data.at(-1)).toBe('[DONE]');
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    expect(chunks.at(-2).choices[0].finish_reason).toBe('length');
    const usage = chunks.at(-1).usage;
    expect(usage.completion_tokens).toBeGreaterThan(0);
    expect(usage.completion_tokens).toBeLessThan(200);
    const ledger = (await listLedger(short.admin, accountId)).filter((e) => e.type === 'charge');
    expect(ledger).toHaveLength(1);
    expect(ledger[0]?.estimated).toBe(true);
    expect(START - (await balanceNano(short, accountId))).toBe(usdToNano(String(usage.cost)));
  });
});
