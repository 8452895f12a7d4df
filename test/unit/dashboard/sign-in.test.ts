/**
 * Sign-in, sessions and sign-out of the dashboard (functions/dashboard/app.tsx, sessions.ts), in
 * process over the memory store with a stand-in OpenID provider (the real client against a real
 * provider: oidc.test.ts and the integration test).
 */
import { describe, expect, it } from 'vitest';
import { hashSessionId, SESSION_COOKIE, SIGN_IN_COOKIE } from '../../../functions/dashboard/sessions.js';
import { accountOf, dashboard, ORIGIN } from './support.js';

const cookieHeader = (response: Response, name: string) =>
  response.headers.getSetCookie().find((cookie) => cookie.startsWith(`${name}=`)) ?? '';

describe('sign-in', () => {
  it('keeps PKCE, state and nonce in a Lax, HttpOnly, Secure __Host- cookie and redirects to the provider', async () => {
    const { browser } = dashboard();
    const response = await browser().fetch(`${ORIGIN}/dashboard/sign-in`);
    expect(response.status).toBe(302);
    expect(response.headers.get('location')).toMatch(/^https:\/\/idp\.example\.com\/authorize\?state=/);
    const cookie = cookieHeader(response, SIGN_IN_COOKIE);
    expect(cookie).toMatch(/; HttpOnly/);
    expect(cookie).toMatch(/; Secure/);
    expect(cookie).toMatch(/; SameSite=Lax/);
    expect(cookie).toMatch(/; Path=\//);
    expect(cookie).not.toMatch(/Domain=/i);
  });

  it('gives the browser only an opaque id in a __Host- cookie (HttpOnly, Secure, Lax, Path=/); the store keeps its hash', async () => {
    const { browser, signIn, store } = dashboard();
    const b = browser();
    const response = await signIn(b, 'user-1');
    expect(response.status).toBe(303);
    expect(response.headers.get('location')).toBe('/dashboard/');
    const cookie = cookieHeader(response, SESSION_COOKIE);
    expect(cookie).toMatch(
      /^__Host-svc_session=[A-Za-z0-9_-]{43}; Max-Age=43200; Path=\/; HttpOnly; Secure; SameSite=Lax$/,
    );
    const id = b.cookies(ORIGIN).get(SESSION_COOKIE) as string;
    expect([...store.sessions.keys()]).toEqual([hashSessionId(id)]);
    expect(JSON.stringify([...store.sessions.values()])).not.toContain(id);
    const session = store.sessions.get(hashSessionId(id));
    expect(session).toMatchObject({ accountId: accountOf(store, 'user-1'), subject: 'user-1' });
    // 12 hours, as the table's TTL attribute (epoch seconds)
    expect(session?.expiresAt).toBe(Date.parse('2025-06-01T12:00:00Z') / 1000 + 12 * 3600);
    // and the sign-in cookie is spent
    expect(b.cookies(ORIGIN).has(SIGN_IN_COOKIE)).toBe(false);
  });

  it('creates the account at the first sign-in with $0 and no key; a second sign-in creates nothing', async () => {
    const { browser, signIn, store } = dashboard();
    await signIn(browser(), 'user-1');
    const accountId = accountOf(store, 'user-1');
    const account = await store.getAccount(accountId);
    expect(account).toMatchObject({ status: 'active', balanceNano: 0n });
    expect(await store.listKeys(accountId)).toEqual([]);
    expect(await store.listLedger(accountId)).toEqual([]);
    const calls = store.calls.length;
    await signIn(browser(), 'user-1');
    expect(store.accounts.size).toBe(1);
    expect(store.calls.slice(calls).filter((c) => c !== 'putSession' && c !== 'deleteSession')).toEqual([]);
    expect(await store.listKeys(accountId)).toEqual([]);
  });

  it('makes a new session id at every sign-in (a planted id is never promoted) and drops the previous one', async () => {
    const { browser, signIn, store, get } = dashboard();
    const b = browser();
    b.cookies(ORIGIN).set(SESSION_COOKIE, 'planted-by-an-attacker');
    await signIn(b, 'user-1');
    const first = b.cookies(ORIGIN).get(SESSION_COOKIE) as string;
    expect(first).not.toBe('planted-by-an-attacker');
    expect(store.sessions.has(hashSessionId('planted-by-an-attacker'))).toBe(false);
    await signIn(b, 'user-1');
    const second = b.cookies(ORIGIN).get(SESSION_COOKIE) as string;
    expect(second).not.toBe(first);
    expect(store.sessions.has(hashSessionId(first))).toBe(false);
    expect((await get(b, '/dashboard/settings/api')).status).toBe(200);
  });

  it('sign-out deletes the session: a stolen copy of the id is dead afterwards', async () => {
    const { browser, signIn, post, get, store } = dashboard();
    const victim = browser();
    await signIn(victim, 'user-1');
    const thief = browser();
    thief.cookies(ORIGIN).set(SESSION_COOKIE, victim.cookies(ORIGIN).get(SESSION_COOKIE) as string);
    expect((await get(thief, '/dashboard/settings/api')).status).toBe(200);
    const out = await post(victim, '/dashboard/sign-out', {});
    expect(out.status).toBe(303);
    expect(cookieHeader(out, SESSION_COOKIE)).toMatch(/Max-Age=0/);
    expect(store.sessions.size).toBe(0);
    const after = await get(thief, '/dashboard/settings/api');
    expect(after.status).toBe(302);
    expect(after.response.headers.get('location')).toBe('/dashboard/sign-in');
  });

  it('ends a session after 12 hours', async () => {
    const { browser, signIn, get, clock } = dashboard();
    const b = browser();
    await signIn(b, 'user-1');
    clock.now = new Date(clock.now.getTime() + 12 * 3600_000 + 1000);
    expect((await get(b, '/dashboard/billing')).status).toBe(302);
  });

  it('refuses a callback without its sign-in cookie, or with another state (400, no session)', async () => {
    const { browser, oidc, store } = dashboard();
    oidc.codes.set('c1', 'user-1');
    const noCookie = await browser().fetch(`${ORIGIN}/dashboard/callback?code=c1&state=state-1`);
    expect(noCookie.status).toBe(400);
    const b = browser();
    await b.fetch(`${ORIGIN}/dashboard/sign-in`);
    const otherState = await b.fetch(`${ORIGIN}/dashboard/callback?code=c1&state=forged`);
    expect(otherState.status).toBe(400);
    expect(await otherState.text()).toContain('could not be verified');
    expect(store.sessions.size).toBe(0);
    expect(store.accounts.size).toBe(0);
  });
});
