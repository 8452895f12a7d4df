import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newGenerationId } from '../../functions/core/ids.js';
import { usdToNano } from '../../functions/core/money.js';
import type { ChargeEntry } from '../../functions/core/store.js';
import { addCredits, createKey, listLedger, revokeKey } from '../../lib/admin/operations.js';
import { completeOnce } from '../support/busy-load.js';
import { settled } from '../support/settled.js';
import {
  balanceNano,
  getWithKey,
  landTransfers,
  newAccount,
  startTarget,
  type Target,
} from '../support/target.js';

/**
 * OpenRouter's habits (docs/compatibility.md, "Customers see their money"): `GET /api/v1/key` says
 * what the calling key has spent, exactly, and `GET /api/v1/credits` also answers OpenRouter's
 * `{data: {total_credits, total_usage}}` beside the fields it has always answered.
 */
let target: Target;
beforeAll(async () => {
  target = await startTarget();
});
afterAll(async () => {
  await target?.stop();
});

const get = (path: string, key: string) => getWithKey(target, path, key);

/** A USD number of a reply, as the integer nano-USD it stands for. */
const nano = (usd: unknown) => usdToNano(String(usd));

/** What the ledger charged each key of the account, in nano-USD. */
async function chargesByKey(accountId: string) {
  const byKey = new Map<string, bigint>();
  let total = 0n;
  for (const entry of await listLedger(target.admin, accountId)) {
    if (entry.type !== 'charge') continue;
    byKey.set(entry.keyId ?? '', (byKey.get(entry.keyId ?? '') ?? 0n) - entry.deltaNano);
    total -= entry.deltaNano;
  }
  return { byKey, total };
}

/** Two keys of one account, each sending `each` requests (all at once). */
async function spendWithTwoKeys(account: { accountId: string; key: string; keyId: string }, each: number) {
  const second = await createKey(target.admin, account.accountId, 'second key');
  const served = await Promise.all(
    Array.from({ length: each * 2 }, (_, i) => completeOnce(target, i % 2 ? second.key : account.key, i)),
  );
  expect(served.every((s) => s.status === 200)).toBe(true);
  await settled(target);
  return second;
}

describe('GET /api/v1/key', () => {
  it("answers the calling key's label and its exact usage, each key its own", async () => {
    const account = await newAccount(target, '10');
    const second = await spendWithTwoKeys(account, 4);
    const { byKey, total } = await chargesByKey(account.accountId);
    expect(byKey.size).toBe(2);

    const first = await get('/key', account.key);
    expect(first.status).toBe(200);
    expect(first.body).toEqual({
      data: {
        label: 'test',
        usage: expect.any(Number),
        limit: null,
        limit_remaining: null,
        limit_reset: null,
        is_free_tier: false,
        is_management_key: false,
        expires_at: null,
        created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        // The rest of OpenRouter's schema, answered as docs/compatibility.md says.
        // Today's charges (every one so far is today's): the key's day counters (core/store.ts).
        usage_daily: expect.any(Number),
        usage_weekly: 0,
        usage_monthly: 0,
        byok_usage: 0,
        byok_usage_daily: 0,
        byok_usage_weekly: 0,
        byok_usage_monthly: 0,
        include_byok_in_limit: false,
        is_provisioning_key: false,
        creator_user_id: null,
        organization_id: null,
        workspace_id: null,
        allowed_data_regions: ['global'],
        free_model_daily_requests: { limit: 0, remaining: 0, used: 0 },
        rate_limit: { requests: -1, interval: '10s', note: 'This field is deprecated and safe to ignore.' },
      },
    });
    // OpenRouter's older path answers the same.
    expect((await get('/auth/key', account.key)).body).toEqual(first.body);
    const other = await get('/key', second.key);
    expect(other.body).toMatchObject({ data: { label: 'second key' } });
    const usageOf = (reply: typeof first) => nano((reply.body.data as { usage: number }).usage);
    expect(usageOf(first)).toBe(byKey.get(account.keyId));
    expect(usageOf(other)).toBe(byKey.get(second.keyId));
    expect(usageOf(first) + usageOf(other)).toBe(total);
    expect(usageOf(first)).toBeGreaterThan(0n);
    // usage_daily: exact, this key's charges of today.
    expect(nano((first.body.data as { usage_daily: number }).usage_daily)).toBe(usageOf(first));
  });

  it('sums the usage over the slices of a split account', async () => {
    const account = await newAccount(target, '10');
    await target.admin.store.splitAccount(account.accountId, 4);
    await landTransfers(target);
    const second = await spendWithTwoKeys(account, 12);
    const { byKey, total } = await chargesByKey(account.accountId);
    // The charges went to more than one slice.
    const charges = (await listLedger(target.admin, account.accountId)).filter((e) => e.type === 'charge');
    expect(new Set(charges.map((e) => e.entryId.charAt(15))).size).toBeGreaterThan(1);
    const first = nano(((await get('/key', account.key)).body.data as { usage: number }).usage);
    const other = nano(((await get('/key', second.key)).body.data as { usage: number }).usage);
    expect(first).toBe(byKey.get(account.keyId));
    expect(other).toBe(byKey.get(second.keyId));
    expect(first + other).toBe(total);
  }, 60_000);

  it('counts a settlement once, however often it is sent (the sweeper and bill-logged paths included)', async () => {
    const account = await newAccount(target, '1');
    const entry: ChargeEntry = {
      accountId: account.accountId,
      generationId: newGenerationId(),
      keyId: account.keyId,
      tier: 'svc-fast',
      upstreamModel: 'sim',
      promptTokens: 1,
      completionTokens: 1,
      cachedTokens: 0,
      upstreamCostUsd: '0.000001',
      billedNano: 1_300n,
      estimated: false,
      createdAt: new Date().toISOString(),
    };
    expect(await target.admin.store.settleCharge(entry)).toBe('settled');
    // The same transaction again (its token makes it a no-op), and one with a hold (another token,
    // met by the ledger entry's condition): neither counts it again.
    await target.admin.store.settleCharge(entry);
    const hold = {
      accountId: account.accountId,
      holdId: entry.generationId,
      amountNano: 0n,
      expiresAt: 0,
      createdAt: '',
    };
    expect(await target.admin.store.settleCharge(entry, { hold })).toBe('already-settled');
    expect(await target.admin.store.keyUsage(account.accountId, account.keyId)).toBe(1_300n);
    expect(await balanceNano(target, account.accountId)).toBe(usdToNano('1') - 1_300n);
    expect(nano(((await get('/key', account.key)).body.data as { usage: number }).usage)).toBe(1_300n);
  });

  it('is 401 for a revoked key, and without a key', async () => {
    const account = await newAccount(target, '1');
    expect((await get('/key', account.key)).status).toBe(200);
    await revokeKey(target.admin, account.keyId);
    const revoked = await get('/key', account.key);
    expect(revoked.status).toBe(401);
    expect(revoked.body).toMatchObject({ error: { code: 'revoked_api_key' } });
    expect((await get('/auth/key', account.key)).status).toBe(401);
    expect((await fetch(`${target.baseUrl}/key`)).status).toBe(401);
    expect((await fetch(`${target.baseUrl}/auth/key`)).status).toBe(401);
  });
});

describe("GET /api/v1/credits in OpenRouter's shape too", () => {
  it('answers data.total_credits (every top-up) and data.total_usage (every charge), exactly', async () => {
    const account = await newAccount(target, '2.5');
    expect((await addCredits(target.admin, account.accountId, '1.25', 'pay-or-1')).applied).toBe(true);
    await spendWithTwoKeys(account, 3);
    const { total } = await chargesByKey(account.accountId);
    const { status, body } = await get('/credits', account.key);
    expect(status).toBe(200);
    const data = body.data as { total_credits: number; total_usage: number };
    expect(Object.keys(data).sort()).toEqual(['total_credits', 'total_usage']);
    expect(nano(data.total_credits)).toBe(usdToNano('3.75'));
    expect(nano(data.total_usage)).toBe(total);
    // The fields it has always answered, beside: the balance is what is left of the credits.
    expect(body).toMatchObject({ object: 'credits', currency: 'USD', held: 0 });
    expect(nano(body.balance)).toBe(usdToNano('3.75') - total);
    expect(nano(body.available)).toBe(usdToNano('3.75') - total);
  });

  it("answers a split account's totals, not the slice the request read", async () => {
    const account = await newAccount(target, '4');
    await target.admin.store.splitAccount(account.accountId, 4);
    await landTransfers(target);
    await spendWithTwoKeys(account, 4);
    const { total } = await chargesByKey(account.accountId);
    const { body } = await get('/credits', account.key);
    const data = body.data as { total_credits: number; total_usage: number };
    expect(nano(data.total_credits)).toBe(usdToNano('4'));
    expect(nano(data.total_usage)).toBe(total);
    expect(nano(body.balance)).toBe(usdToNano('4') - total);
  }, 60_000);

  it('answers zero for an account with no credits and no requests', async () => {
    const account = await newAccount(target, '0');
    const { status, body } = await get('/credits', account.key);
    expect(status).toBe(200);
    expect(body).toMatchObject({ balance: 0, data: { total_credits: 0, total_usage: 0 } });
  });
});
