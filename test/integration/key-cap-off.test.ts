import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usdToNano } from '../../functions/core/money.js';
import { parseCommandLine, runCommand } from '../../lib/admin/cli.js';
import { balanceNano, getWithKey, newAccount, startTarget, type Target } from '../support/target.js';

/**
 * Per-key daily spend caps off, the default (KEY_DAILY_CAPS unset), on the whole local stack: the
 * product's contract has no per-key budget, so a cap stored on a key item (from a time caps were on)
 * is kept but not in force. Its key is served and charged as any other past the cap, `/key` states
 * no limit, and the operator cannot set one. Caps on: key-cap.test.ts.
 */
let target: Target;

beforeAll(async () => {
  delete process.env.KEY_DAILY_CAPS;
  target = await startTarget();
}, 60_000);
afterAll(async () => {
  await target?.stop();
});

async function ask(key: string) {
  const response = await fetch(`${target.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'svc-fast',
      max_tokens: 50,
      messages: [{ role: 'user', content: 'hi [[sim:tokens=5]]' }],
    }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const costOf = (body: Record<string, unknown>) => usdToNano(String((body.usage as { cost: number }).cost));

describe('a key with a stored daily cap, caps off', () => {
  it('is served past its cap and charged normally; /key states no limit; the stored cap is kept', async () => {
    const { accountId, key, keyId } = await newAccount(target, '5');
    // A cap of 1 nano-USD, written as it was while caps were on: the first request spends past it.
    await target.admin.store.setKeyDailyCap(accountId, keyId, 1n);
    const first = await ask(key);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(await balanceNano(target, accountId)).toBe(usdToNano('5') - costOf(first.body));
    const second = await ask(key);
    expect(second.status, JSON.stringify(second.body)).toBe(200);
    expect(await balanceNano(target, accountId)).toBe(
      usdToNano('5') - costOf(first.body) - costOf(second.body),
    );

    const { status, body } = await getWithKey(target, '/key', key);
    expect(status).toBe(200);
    expect(body.data).toMatchObject({ limit: null, limit_remaining: null, limit_reset: null });
    // What it spent today is still stated (usage_daily is not a cap's).
    expect((body.data as { usage_daily: number }).usage_daily).toBeGreaterThan(0);
    expect((await target.admin.store.findKeyById(keyId))?.dailyCapNano).toBe(1n);
  });

  it('cannot be given a cap by the operator: `key cap` refuses in one line naming the setting', async () => {
    const { keyId } = await newAccount(target, '1');
    expect(target.admin.keyDailyCaps).toBe(false);
    await expect(
      runCommand(target.admin, parseCommandLine(['key', 'cap', keyId, '--usd', '1'])),
    ).rejects.toThrow(
      /^per-key daily caps are off: deploy with -c keyDailyCaps=true \(locally KEY_DAILY_CAPS=on/,
    );
    expect((await target.admin.store.findKeyById(keyId))?.dailyCapNano).toBeUndefined();
  });
});
