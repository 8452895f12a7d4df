/**
 * Sessions and the two cookies. The browser holds only an opaque random id (256 bits) in a `__Host-`
 * cookie (HttpOnly, Secure, SameSite=Lax, Path=/, no Domain: set by this origin alone, sent to it
 * alone); the table keeps its SHA-256, the account and an expiry (its TTL attribute). Every sign-in
 * makes a new id (an id planted before sign-in is never promoted: no fixation) and drops the one the
 * browser had; sign-out deletes the item, so a copy of the id is dead from then on.
 *
 * The sign-in cookie carries the PKCE verifier, state and nonce from the redirect to the provider to
 * its callback: SameSite=Lax, since the callback is a top-level cross-site navigation (Strict would
 * drop it), HttpOnly, 10 minutes. It needs no signature: it is only ever compared with what the
 * provider sends back, and a browser can only plant its own.
 *
 * `__Host-` and `Secure` on http://127.0.0.1 or http://localhost: browsers treat both as secure
 * contexts (Chromium and Firefox accept and send Secure cookies there), so the same cookies work
 * under `npm start` as behind CloudFront over https.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import type { DashboardSession, SessionNotice, Store } from '../core/store.js';
import type { SignInChecks } from './oidc.js';

export const SESSION_COOKIE = '__Host-svc_session';
export const SIGN_IN_COOKIE = '__Host-svc_signin';
/** How long a session lasts from sign-in. */
const SESSION_TTL_SECONDS = 12 * 60 * 60;
const SIGN_IN_TTL_SECONDS = 10 * 60;

const cookieOptions = (maxAge: number) =>
  ({ httpOnly: true, secure: true, sameSite: 'Lax', path: '/', maxAge }) as const;

export const hashSessionId = (id: string): string => createHash('sha256').update(id).digest('hex');

/** Starts a session for the account: a new random id, stored by its hash, set in the session cookie. */
export async function startSession(
  c: Context,
  store: Store,
  user: { accountId: string; subject: string; authTime?: number | undefined },
  now: Date,
): Promise<void> {
  const previous = getCookie(c, SESSION_COOKIE);
  if (previous) await store.deleteSession(hashSessionId(previous));
  const id = randomBytes(32).toString('base64url');
  const session: DashboardSession = {
    sessionHash: hashSessionId(id),
    accountId: user.accountId,
    subject: user.subject,
    createdAt: now.toISOString(),
    expiresAt: Math.floor(now.getTime() / 1000) + SESSION_TTL_SECONDS,
    ...(user.authTime !== undefined ? { authTime: user.authTime } : {}),
  };
  await store.putSession(session);
  setCookie(c, SESSION_COOKIE, id, cookieOptions(SESSION_TTL_SECONDS));
}

/** The request's live session, or undefined (no cookie, unknown, expired or signed out). */
export async function currentSession(
  c: Context,
  store: Store,
  now: Date,
): Promise<DashboardSession | undefined> {
  const id = getCookie(c, SESSION_COOKIE);
  if (!id || id.length > 100) return undefined;
  return store.getSession(hashSessionId(id), Math.floor(now.getTime() / 1000));
}

/** Ends the request's session: the item deleted, the cookie cleared. */
export async function endSession(c: Context, store: Store): Promise<void> {
  const id = getCookie(c, SESSION_COOKIE);
  if (id) await store.deleteSession(hashSessionId(id));
  deleteCookie(c, SESSION_COOKIE, cookieOptions(0));
}

/** How long a notice left by a POST waits for the page its redirect shows. */
const NOTICE_TTL_SECONDS = 60;

/**
 * The answer to a POST that changed something (Post/Redirect/Get): a 303 to the page that shows it, so
 * a reload there reads the page again and never sends the form twice. What that page must show of the
 * change (a new key, in full, once) is left on the session as a notice, taken by the page's GET.
 */
export async function redirectAfterPost(
  c: Context,
  store: Store,
  session: DashboardSession,
  path: string,
  now: Date,
  notice?: Omit<SessionNotice, 'until'>,
): Promise<Response> {
  if (notice)
    await store.setSessionNotice(session.sessionHash, {
      ...notice,
      until: Math.floor(now.getTime() / 1000) + NOTICE_TTL_SECONDS,
    });
  return c.redirect(path, 303);
}

/** The notice a POST left for this page (redirectAfterPost), deleted as it is read. */
export function takeNotice(
  store: Store,
  session: DashboardSession,
  now: Date,
): Promise<SessionNotice | undefined> {
  return store.takeSessionNotice(session.sessionHash, Math.floor(now.getTime() / 1000));
}

/**
 * How recent a sign-in must be to create a key or change auto top-up: a session taken over (a stolen
 * cookie, an unlocked computer) cannot spend a card without the user's password (and MFA, if set).
 */
const FRESH_SIGN_IN_SECONDS = 10 * 60;

/** The session's sign-in is recent enough for an action that can spend money (FRESH_SIGN_IN_SECONDS). */
export function signedInRecently(session: DashboardSession, now: Date): boolean {
  return (
    session.authTime !== undefined &&
    Math.floor(now.getTime() / 1000) - session.authTime <= FRESH_SIGN_IN_SECONDS
  );
}

/** A path of this dashboard to send the browser back to (never another site's: no open redirect). */
export function isDashboardPath(path: string): boolean {
  return /^\/dashboard\/[A-Za-z0-9/_-]*$/.test(path) && !path.includes('//');
}

export function keepSignIn(c: Context, checks: SignInChecks): void {
  setCookie(
    c,
    SIGN_IN_COOKIE,
    Buffer.from(JSON.stringify(checks)).toString('base64url'),
    cookieOptions(SIGN_IN_TTL_SECONDS),
  );
}

/** The sign-in's checks, once: the cookie is cleared as it is read. */
export function takeSignIn(c: Context): SignInChecks | undefined {
  const value = getCookie(c, SIGN_IN_COOKIE);
  deleteCookie(c, SIGN_IN_COOKIE, cookieOptions(0));
  if (!value) return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as Partial<SignInChecks>;
    const { codeVerifier, state, nonce, freshSince, returnTo, invite } = parsed;
    if (typeof codeVerifier === 'string' && typeof state === 'string' && typeof nonce === 'string')
      return {
        codeVerifier,
        state,
        nonce,
        ...(typeof freshSince === 'number' ? { freshSince } : {}),
        ...(typeof returnTo === 'string' && isDashboardPath(returnTo) ? { returnTo } : {}),
        ...(invite &&
        typeof invite.accountId === 'string' &&
        typeof invite.invitationId === 'string' &&
        typeof invite.token === 'string'
          ? {
              invite: { accountId: invite.accountId, invitationId: invite.invitationId, token: invite.token },
            }
          : {}),
      };
  } catch {
    // a cookie that is not ours: no sign-in in progress
  }
  return undefined;
}
