/**
 * The dashboard's OpenID client (functions/dashboard/oidc.ts) against the local provider
 * (lib/local/oidc.ts), the same code path as against Cognito: the sign-in page is followed with the dev
 * user's credentials, and the callback is exchanged for the ID token's subject. The checks the flow
 * rests on are each shown to refuse: a wrong state, a wrong nonce, a wrong PKCE verifier, and an ID
 * token whose signature does not verify against the issuer's JWKS.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type OidcClient,
  openIdClient,
  type SignInChecks,
  SignInError,
} from '../../../functions/dashboard/oidc.js';
import { type RunningLocalOidc, startLocalOidc } from '../../../lib/local/oidc.js';
import { Browser, formAction } from '../../support/browser.js';

const REDIRECT = 'http://127.0.0.1:9/dashboard/callback';
let provider: RunningLocalOidc;
let oidc: OidcClient;

beforeAll(async () => {
  provider = await startLocalOidc({
    redirectUris: [REDIRECT],
    users: [{ email: 'second@example.com', password: 'second', subject: 'second-user' }],
  });
  oidc = await openIdClient({
    issuer: provider.issuer,
    clientId: provider.clientId,
    clientSecret: provider.clientSecret,
    redirectUri: REDIRECT,
  });
});
afterAll(async () => {
  await provider?.close();
});

/** Signs in at the provider and returns the callback URL it redirects to (not followed). */
async function signIn(
  url: URL,
  password = provider.user.password,
  browser = new Browser(),
  email = provider.user.email,
): Promise<{ status: number; callback?: URL }> {
  const page = await browser.open(url.href);
  expect(page.body).toContain('Sign in');
  const action = new URL(formAction(page.body, /\/interaction\//), page.url).href;
  let response = await browser.fetch(action, {
    form: { email, password },
    origin: provider.issuer,
  });
  for (let hops = 0; hops < 10 && response.status >= 300 && response.status < 400; hops++) {
    const next = new URL(String(response.headers.get('location')), action);
    if (next.href.startsWith(REDIRECT)) return { status: response.status, callback: next };
    response = await browser.fetch(next.href);
  }
  return { status: response.status };
}

describe('the OpenID client against the local provider', () => {
  it('asks for a code with PKCE (S256), state and nonce, and gets the verified subject for it', async () => {
    const { url, checks } = await oidc.begin();
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    expect(url.searchParams.get('code_challenge')).toBeTruthy();
    expect(url.searchParams.get('state')).toBe(checks.state);
    expect(url.searchParams.get('nonce')).toBe(checks.nonce);
    expect(url.searchParams.get('redirect_uri')).toBe(REDIRECT);
    const { callback } = await signIn(url);
    expect(callback?.searchParams.get('code')).toBeTruthy();
    const user = await oidc.finish(callback as URL, checks);
    expect(user).toEqual({
      subject: provider.user.subject,
      email: provider.user.email,
      emailVerified: true,
      authTime: expect.any(Number),
    });
  });

  it('signs in each of its users as themselves (a team: their own sub and e-mail), and no one with another password', async () => {
    const { url, checks } = await oidc.begin();
    const { callback } = await signIn(url, 'second', new Browser(), 'second@example.com');
    expect(await oidc.finish(callback as URL, checks)).toEqual({
      subject: 'second-user',
      email: 'second@example.com',
      emailVerified: true,
      authTime: expect.any(Number),
    });
    const wrong = await signIn(
      (await oidc.begin()).url,
      provider.user.password,
      new Browser(),
      'second@example.com',
    );
    expect(wrong).toEqual({ status: 401 });
  });

  it('a fresh sign-in (prompt=login, max_age=0) asks for the password again despite the provider session', async () => {
    const browser = new Browser();
    const first = await oidc.begin();
    const signedIn = await signIn(first.url, provider.user.password, browser);
    await oidc.finish(signedIn.callback as URL, first.checks);
    const since = Math.floor(Date.now() / 1000);
    const fresh = await oidc.begin({ fresh: true });
    expect(fresh.url.searchParams.get('prompt')).toBe('login');
    expect(fresh.url.searchParams.get('max_age')).toBe('0');
    // The same browser, signed in at the provider, is shown the sign-in page again.
    const { callback } = await signIn(fresh.url, provider.user.password, browser);
    const user = await oidc.finish(callback as URL, fresh.checks);
    expect(user.authTime).toBeGreaterThanOrEqual(since);
  });

  it('refuses a wrong password at the provider (no code)', async () => {
    const { url } = await oidc.begin();
    expect(await signIn(url, 'wrong')).toEqual({ status: 401 });
  });

  const refused: [string, (checks: SignInChecks) => SignInChecks][] = [
    ['a state that is not the one sent', (c) => ({ ...c, state: 'other-state' })],
    ['a nonce that is not the one sent', (c) => ({ ...c, nonce: 'other-nonce' })],
    [
      'a PKCE verifier that is not the one sent',
      (c) => ({ ...c, codeVerifier: `${c.codeVerifier.slice(1)}x` }),
    ],
  ];
  for (const [what, alter] of refused)
    it(`refuses the callback with ${what}`, async () => {
      const { url, checks } = await oidc.begin();
      const { callback } = await signIn(url);
      await expect(oidc.finish(callback as URL, alter(checks))).rejects.toBeInstanceOf(SignInError);
    });

  it('refuses an ID token whose signature does not verify against the JWKS', async () => {
    // The token endpoint's answer altered in transit: the ID token's signature made invalid.
    const tampering = await openIdClient(
      {
        issuer: provider.issuer,
        clientId: provider.clientId,
        clientSecret: provider.clientSecret,
        redirectUri: REDIRECT,
      },
      {
        fetch: async (url, options) => {
          const response = await fetch(url, options as RequestInit);
          if (!url.endsWith('/token')) return response;
          const body = (await response.json()) as { id_token: string };
          const [header, payload, signature = ''] = body.id_token.split('.');
          const flipped = `${signature.slice(0, 10)}${signature[10] === 'A' ? 'B' : 'A'}${signature.slice(11)}`;
          body.id_token = `${header}.${payload}.${flipped}`;
          return new Response(JSON.stringify(body), {
            status: response.status,
            headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
          });
        },
      },
    );
    const { url, checks } = await tampering.begin();
    const { callback } = await signIn(url);
    const error = await tampering.finish(callback as URL, checks).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SignInError);
    const causes: string[] = [];
    for (let e: unknown = error; e instanceof Error; e = e.cause) causes.push(e.message);
    expect(causes).toContain('JWT signature verification failed');
  });
});
