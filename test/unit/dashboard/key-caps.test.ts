/**
 * Settings → API: a key's daily spend cap, set and removed on the page, checked on the server, over the
 * memory store (support.ts), with per-key daily caps on; and none of it with caps off (the default).
 * The cap itself (the 402 past it) is the request path's: key-cap tests.
 */
import { describe, expect, it } from 'vitest';
import { chargeEntry } from '../../support/fixtures.js';
import { accountOf, dashboard } from './support.js';

async function withKey(options: { keyDailyCaps: boolean } = { keyDailyCaps: true }) {
  const d = dashboard(options);
  const b = d.browser();
  await d.signIn(b, 'user-1');
  const accountId = accountOf(d.store, 'user-1');
  await d.post(b, '/dashboard/settings/api/keys', { name: 'ci' });
  const [key] = await d.store.listKeys(accountId);
  return { ...d, b, accountId, keyId: key?.keyId as string };
}

describe('a key daily spend cap on Settings → API', () => {
  it('sets a cap in whole cents, shows it with what the key spent today, and removes it', async () => {
    const { b, post, get, store, keyId } = await withKey();
    const set = await post(b, `/dashboard/settings/api/keys/${keyId}/cap`, { cap: '12.50' });
    expect(set.status).toBe(303);
    expect((await store.findKeyById(keyId))?.dailyCapNano).toBe(12_500_000_000n);
    const page = (await get(b, '/dashboard/settings/api')).body;
    expect(page).toContain('$12.50 a day');
    expect(page).toContain('$0.00 spent today (UTC)');
    await post(b, `/dashboard/settings/api/keys/${keyId}/cap`, { cap: '' });
    expect((await store.findKeyById(keyId))?.dailyCapNano).toBeUndefined();
    expect((await get(b, '/dashboard/settings/api')).body).toContain('No cap');
  });

  it.each(['0', '-5', '4.999', '1e9', 'abc', '10000.01'])(
    'refuses a cap of %s with a clear message (400) and writes nothing',
    async (cap) => {
      const { b, post, store, keyId } = await withKey();
      const refused = await post(b, `/dashboard/settings/api/keys/${keyId}/cap`, { cap });
      expect(refused.status).toBe(400);
      expect(await refused.text()).toMatch(/The daily cap must be .*\$0\.01 to \$10,000\.00/);
      expect((await store.findKeyById(keyId))?.dailyCapNano).toBeUndefined();
    },
  );

  it("answers 404 for another account's key, and leaves it uncapped", async () => {
    const { b, post, store, signIn, browser } = await withKey();
    const other = browser();
    await signIn(other, 'user-2');
    await post(other, '/dashboard/settings/api/keys', { name: 'theirs' });
    const [theirs] = await store.listKeys(accountOf(store, 'user-2'));
    const attempt = await post(b, `/dashboard/settings/api/keys/${theirs?.keyId}/cap`, { cap: '1' });
    expect(attempt.status).toBe(404);
    expect((await store.findKeyById(theirs?.keyId as string))?.dailyCapNano).toBeUndefined();
  });

  it('shows a key that has spent its cap today (UTC) as "Cap reached", not Active', async () => {
    const { b, post, get, store, keyId, accountId } = await withKey();
    await post(b, `/dashboard/settings/api/keys/${keyId}/cap`, { cap: '1' });
    // $2 spent yesterday (the clock's day is 2025-06-01 UTC): today's cap is untouched.
    await store.settleCharge(
      chargeEntry(accountId, keyId, 2_000_000_000n, { createdAt: '2025-05-31T23:59:59.000Z' }),
    );
    expect((await get(b, '/dashboard/settings/api')).body).toMatch(/<td data-label="Status">Active<\/td>/);
    // $1 today: the cap is spent.
    await store.settleCharge(
      chargeEntry(accountId, keyId, 1_000_000_000n, { createdAt: '2025-06-01T11:00:00.000Z' }),
    );
    const page = (await get(b, '/dashboard/settings/api')).body;
    expect(page).toContain('<td data-label="Status">Cap reached today (resets 00:00 UTC)</td>');
    expect(page).not.toMatch(/<td data-label="Status">Active<\/td>/);
  });
});

describe('Settings → API with per-key daily caps off (the default)', () => {
  it('has no cap column and no cap form, and a key past a stored cap is simply Active', async () => {
    const { b, get, store, keyId, accountId } = await withKey({ keyDailyCaps: false });
    await store.setKeyDailyCap(accountId, keyId, 1_000_000_000n);
    await store.settleCharge(
      chargeEntry(accountId, keyId, 2_000_000_000n, { createdAt: '2025-06-01T11:00:00.000Z' }),
    );
    const page = (await get(b, '/dashboard/settings/api')).body;
    expect(page).toMatch(/<td data-label="Status">Active<\/td>/);
    expect(page).not.toContain('Daily spend cap');
    expect(page).not.toContain('Set cap');
    expect(page).not.toContain('/cap"');
    expect(page).not.toContain('Cap reached');
  });

  it('refuses the cap POST (404) and leaves a stored cap as it was', async () => {
    const { b, post, store, keyId, accountId } = await withKey({ keyDailyCaps: false });
    await store.setKeyDailyCap(accountId, keyId, 1_000_000_000n);
    const refused = await post(b, `/dashboard/settings/api/keys/${keyId}/cap`, { cap: '5' });
    expect(refused.status).toBe(404);
    const removal = await post(b, `/dashboard/settings/api/keys/${keyId}/cap`, { cap: '' });
    expect(removal.status).toBe(404);
    expect((await store.findKeyById(keyId))?.dailyCapNano).toBe(1_000_000_000n);
  });
});
