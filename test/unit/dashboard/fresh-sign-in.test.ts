/**
 * A sign-in again before what can spend money (functions/dashboard/pages-routes.tsx): creating a key
 * or changing auto top-up needs a sign-in of the last 10 minutes; a staler session is sent to sign in
 * again (the provider asked for `max_age=0`), whose callback accepts only an auth_time after its
 * redirect, and comes back to the page. Each change is e-mailed to the account (the watch's outbox).
 */
import { describe, expect, it } from 'vitest';
import { SESSION_COOKIE } from '../../../functions/dashboard/sessions.js';
import type { Browser } from '../../support/browser.js';
import { MemoryWatchStore } from '../../support/memory-watch.js';
import { accountOf, dashboard, ORIGIN } from './support.js';

const KEYS = '/dashboard/settings/api';
const BILLING = '/dashboard/billing';
const EMAIL = 'owner@example.com';

async function signedIn() {
  const watches = new MemoryWatchStore();
  const d = dashboard({ watches });
  const b = d.browser();
  // The ID tokens' e-mail: the address the dashboard remembers at each sign-in.
  d.oidc.emails.set('user-1', EMAIL);
  await d.signIn(b, 'user-1');
  await watches.rememberEmail('user-1', EMAIL, d.clock.now.toISOString());
  const accountId = accountOf(d.store, 'user-1');
  /** Half an hour on: the session's sign-in is stale. */
  const later = () => {
    d.clock.now = new Date(d.clock.now.getTime() + 30 * 60_000);
  };
  /** Follows a stale POST's redirect through the provider; the callback's response. */
  const signInAgain = async (b: Browser, redirect: Response, authTime?: number) => {
    expect(redirect.status).toBe(303);
    const start = await b.fetch(new URL(String(redirect.headers.get('location')), ORIGIN).href);
    expect(start.status).toBe(302);
    const provider = new URL(String(start.headers.get('location')));
    expect(provider.searchParams.get('max_age')).toBe('0');
    expect(d.oidc.begun.at(-1)).toEqual({ fresh: true });
    const code = `code-again-${Math.random()}`;
    d.oidc.codes.set(code, 'user-1');
    d.oidc.authTime = authTime;
    return b.fetch(
      `${ORIGIN}/dashboard/callback?code=${encodeURIComponent(code)}&state=${provider.searchParams.get('state')}`,
    );
  };
  return { ...d, b, watches, accountId, later, signInAgain };
}

describe('a fresh sign-in before creating a key', () => {
  it('sends a stale session to sign in again, and creates nothing', async () => {
    const t = await signedIn();
    t.later();
    const response = await t.post(t.b, '/dashboard/settings/api/keys', { name: 'stolen' });
    expect(response.status).toBe(303);
    expect(response.headers.get('location')).toBe(`/dashboard/sign-in?fresh=${encodeURIComponent(KEYS)}`);
    expect(await t.store.listKeys(t.accountId)).toEqual([]);
    expect(t.watches.outbox.size).toBe(0);
  });

  it('after the fresh sign-in, returns to the page, where creating the key works and is e-mailed', async () => {
    const t = await signedIn();
    t.later();
    const redirect = await t.post(t.b, '/dashboard/settings/api/keys', { name: 'ci' });
    const callback = await t.signInAgain(t.b, redirect);
    expect(callback.status).toBe(303);
    expect(callback.headers.get('location')).toBe(KEYS);
    expect(await t.store.listKeys(t.accountId)).toEqual([]);

    const created = await t.post(t.b, '/dashboard/settings/api/keys', { name: 'ci' });
    expect(created.status).toBe(303);
    expect(created.headers.get('location')).toBe(KEYS);
    expect((await t.store.listKeys(t.accountId)).map((key) => key.name)).toEqual(['ci']);
    const messages = [...t.watches.outbox.values()];
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatchObject({ accountId: t.accountId, to: EMAIL });
    expect(messages[0]?.text).toContain(`A key named "ci" was created on your account (${EMAIL}) at`);
    expect(messages[0]?.text).toContain(t.clock.now.toISOString());
  });

  it('refuses a callback whose auth_time is from before the redirect: no new session, still stale', async () => {
    const t = await signedIn();
    const signedInAt = Math.floor(t.clock.now.getTime() / 1000);
    t.later();
    const cookie = t.b.cookies(ORIGIN).get(SESSION_COOKIE);
    const redirect = await t.post(t.b, '/dashboard/settings/api/keys', { name: 'stolen' });
    // The provider kept its own session and did not ask for the password: the old auth_time.
    const callback = await t.signInAgain(t.b, redirect, signedInAt);
    expect(callback.status).toBe(400);
    expect(await callback.text()).toContain('did not ask for your password again');
    expect(t.b.cookies(ORIGIN).get(SESSION_COOKIE)).toBe(cookie);
    const again = await t.post(t.b, '/dashboard/settings/api/keys', { name: 'stolen' });
    expect(again.status).toBe(303);
    expect(again.headers.get('location')).toMatch(/^\/dashboard\/sign-in\?fresh=/);
    expect(await t.store.listKeys(t.accountId)).toEqual([]);
  });

  it('goes back only to a dashboard path: any other return is an ordinary sign-in', async () => {
    const t = await signedIn();
    const start = await t.b.fetch(
      `${ORIGIN}/dashboard/sign-in?fresh=${encodeURIComponent('https://evil.example/')}`,
    );
    expect(new URL(String(start.headers.get('location'))).searchParams.get('max_age')).toBeNull();
  });
});

describe('a fresh sign-in before changing auto top-up', () => {
  const form = { below: '5', buy: '1000', enabled: 'on' };

  it('sends a stale session to sign in again and changes nothing; then the change is made and e-mailed', async () => {
    const t = await signedIn();
    await t.watches.recordCard(
      t.accountId,
      { customer: 'cus_1', paymentMethod: 'pm_1', brand: 'visa', last4: '4242', from: 1 },
      t.clock.now.toISOString(),
    );
    t.later();
    const redirect = await t.post(t.b, '/dashboard/billing/auto-top-up', form);
    expect(redirect.headers.get('location')).toBe(`/dashboard/sign-in?fresh=${encodeURIComponent(BILLING)}`);
    expect((await t.watches.getWatch(t.accountId))?.autoTopUp?.enabled).not.toBe(true);
    expect(t.watches.outbox.size).toBe(0);

    const callback = await t.signInAgain(t.b, redirect);
    expect(callback.headers.get('location')).toBe(BILLING);
    const changed = await t.post(t.b, '/dashboard/billing/auto-top-up', form);
    expect(changed.status).toBe(303);
    expect((await t.watches.getWatch(t.accountId))?.autoTopUp).toMatchObject({
      enabled: true,
      belowCents: 500,
      buyCents: 100_000,
    });
    const messages = [...t.watches.outbox.values()];
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatchObject({ to: EMAIL, subject: 'Auto top-up was changed on your account' });
    expect(messages[0]?.text).toContain(
      'it is now on: when the balance is below $5.00, your saved card is charged $1,000.00',
    );
  });
});
