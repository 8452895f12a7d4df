/** @jsxImportSource hono/jsx */
/**
 * The dashboard: a Hono application under /dashboard/, rendered on the server (pages.tsx). This file
 * holds what applies to every page (the origin header, security headers, CSRF, sessions) and the
 * sign-in; the customer's pages are in pages-routes.tsx. It runs as a Lambda function behind a
 * buffered Function URL (handler.ts) and, in tests, in process through `app.request`.
 *
 * - CloudFront's secret `x-origin-verify` header is required when one is configured (as by the API's
 *   functions, functions/shared/http.ts): the bare Function URL answers 403.
 * - CSRF: every change is a POST, and a POST is accepted only when its `Origin` is the dashboard's
 *   public origin (configured: behind CloudFront the request's Host is the Function URL's), or, from a
 *   browser that sends no Origin, when `Sec-Fetch-Site` is `same-origin`. GET never changes anything.
 * - Headers: a CSP with scripts and styles from this origin only (no inline script),
 *   `frame-ancestors 'none'`, and `form-action` this origin and Stripe's checkout (the redirect after
 *   the buy form's POST); HTML is never cached.
 */
import { timingSafeEqual } from 'node:crypto';
import { Hono, type MiddlewareHandler } from 'hono';
import { compress } from 'hono/compress';
import { contextStorage } from 'hono/context-storage';
import { secureHeaders } from 'hono/secure-headers';
import { logger } from '../shared/observability.js';
import { accountForSignIn } from './accounts.js';
import type { DashboardDeps, DashboardEnv } from './deps.js';
import { acceptAtSignIn, inviteRoutes } from './invite-routes.js';
import { SignInError } from './oidc.js';
import { OverviewPage, readOverview } from './overview.js';
import { MessagePage, WelcomePage } from './pages.js';
import { customerRoutes } from './pages-routes.js';
import {
  currentSession,
  endSession,
  isDashboardPath,
  keepSignIn,
  startSession,
  takeSignIn,
} from './sessions.js';
import { COPY_SCRIPT, FAVICON, STYLESHEET } from './static.js';
import { clientOf, sessionMember } from './team-access.js';

const SAFE_METHODS = new Set(['GET', 'HEAD']);

/** How far the provider's clock may be behind ours when a fresh sign-in's auth_time is checked. */
const CLOCK_SKEW_SECONDS = 30;

function sameBytes(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** A state change from the dashboard's own pages only (see the file's comment). */
function sameOriginOnly(publicOrigin: string): MiddlewareHandler {
  return async (c, next) => {
    if (SAFE_METHODS.has(c.req.method)) return next();
    const origin = c.req.header('origin');
    const fetchSite = c.req.header('sec-fetch-site');
    const allowed = origin !== undefined ? origin === publicOrigin : fetchSite === 'same-origin';
    if (!allowed) {
      logger.warn('dashboard: cross-origin state change refused', { origin, fetchSite, path: c.req.path });
      return c.text('Forbidden: this request did not come from the dashboard.', 403);
    }
    return next();
  };
}

export function createDashboardApp(deps: DashboardDeps): Hono<DashboardEnv> {
  const now = deps.now ?? (() => new Date());
  const { store } = deps;
  // Not strict: `/dashboard` and `/dashboard/` are the same page.
  const app = new Hono<DashboardEnv>({ strict: false }).basePath('/dashboard');

  // Text answers (HTML, CSS, script) of 1 KiB or more gzipped for a browser that accepts it (or
  // deflate), with `Vary: Accept-Encoding`: CloudFront bills every byte out, and its own compression
  // is off (the behaviours' `compress: false`, which the API's streams need). Outermost, so that it
  // sees every other middleware's headers; Hono's Lambda adapter sends an encoded body as base64.
  app.use('*', compress());
  // The request's context kept for the pages' layout (pages.tsx: the signed-in member's role and
  // accounts, for the header and for hiding what the role cannot do).
  app.use('*', contextStorage());

  app.use('*', async (c, next) => {
    const accepted = await deps.originVerify();
    const got = c.req.header('x-origin-verify') ?? '';
    if (accepted.length > 0 && !accepted.some((value) => sameBytes(got, value)))
      return c.text('Forbidden: open the dashboard through its public address.', 403);
    return next();
  });
  app.use(
    '*',
    secureHeaders({
      contentSecurityPolicy: {
        defaultSrc: ["'none'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'"],
        connectSrc: ["'self'"],
        formAction: ["'self'", ...deps.checkoutOrigins, ...(deps.signOutOrigin ? [deps.signOutOrigin] : [])],
        frameAncestors: ["'none'"],
        baseUri: ["'none'"],
      },
      xFrameOptions: 'DENY',
      referrerPolicy: 'same-origin',
    }),
  );
  app.use('*', async (c, next) => {
    await next();
    if (!c.res.headers.has('cache-control')) c.header('cache-control', 'no-store');
  });
  app.use('*', sameOriginOnly(deps.publicOrigin));

  app.get('/static/style.css', (c) =>
    c.body(STYLESHEET, 200, {
      'content-type': 'text/css; charset=utf-8',
      'cache-control': 'public, max-age=3600',
    }),
  );
  app.get('/static/favicon.svg', (c) =>
    c.body(FAVICON, 200, {
      'content-type': 'image/svg+xml',
      'cache-control': 'public, max-age=3600',
    }),
  );
  app.get('/static/copy.js', (c) =>
    c.body(COPY_SCRIPT, 200, {
      'content-type': 'text/javascript; charset=utf-8',
      'cache-control': 'public, max-age=3600',
    }),
  );

  // Overview: a removed member's session ends here too (sessionMember), and they see the welcome page.
  app.get('/', async (c) => {
    const at = now();
    const signedIn = await currentSession(c, store, at);
    if (!signedIn) return c.html(<WelcomePage />);
    // The member and the page's reads at once (one round trip, not three): nothing read is shown
    // unless the session's person is a member of the account now.
    const [found, overview] = await Promise.all([
      sessionMember(c, store, at, { memberships: true, session: signedIn }),
      readOverview(store, signedIn.accountId, at, deps.publicOrigin),
    ]);
    if (found === undefined || found === 'removed' || !overview) return c.html(<WelcomePage />);
    const { session, member, memberships = [] } = found;
    c.set('session', session);
    c.set('member', member);
    c.set('memberships', memberships);
    return c.html(<OverviewPage overview={overview} />);
  });

  // `?fresh=<dashboard path>`: a sign-in again, asked for before an action that can spend money
  // (pages-routes.tsx): the provider must authenticate the user anew, and the callback sends the
  // browser back to that page, where the user does the action again (the POST is never replayed).
  app.get('/sign-in', async (c) => {
    const returnTo = c.req.query('fresh');
    const fresh = returnTo !== undefined && isDashboardPath(returnTo);
    const { url, checks } = await (await deps.oidc()).begin(fresh ? { fresh: true } : {});
    keepSignIn(c, fresh ? { ...checks, freshSince: Math.floor(now().getTime() / 1000), returnTo } : checks);
    return c.redirect(url.href, 302);
  });

  app.get('/callback', async (c) => {
    const checks = takeSignIn(c);
    const failed = (message: string) =>
      c.html(
        <MessagePage
          title="Sign-in failed"
          message={message}
          signedIn={false}
          link={<a href="/dashboard/sign-in">Sign in again</a>}
        />,
        400,
      );
    if (!checks)
      return failed('This sign-in expired or was started in another browser. Please sign in again.');
    if (c.req.query('error')) return failed('The sign-in was cancelled or refused by the identity provider.');
    const callback = new URL('/dashboard/callback', deps.publicOrigin);
    callback.search = new URL(c.req.url).search;
    let subject: string;
    let email: string | undefined;
    let emailVerified: boolean | undefined;
    let authTime: number | undefined;
    try {
      ({ subject, email, emailVerified, authTime } = await (await deps.oidc()).finish(callback, checks));
    } catch (error) {
      if (!(error instanceof SignInError)) throw error;
      logger.warn('dashboard: sign-in refused', { error });
      return failed('The sign-in could not be verified. Please sign in again.');
    }
    // A fresh sign-in is one the user made after its redirect: an older auth_time (a provider that kept
    // its own session and ignored prompt=login / max_age=0) or none is refused.
    if (
      checks.freshSince !== undefined &&
      (authTime === undefined || authTime < checks.freshSince - CLOCK_SKEW_SECONDS)
    ) {
      logger.warn('dashboard: fresh sign-in refused: auth_time before its redirect', {
        authTime,
        freshSince: checks.freshSince,
      });
      return failed('The identity provider did not ask for your password again. Please sign in again.');
    }
    const at = now();
    // An invitation's sign-in (invite-routes.tsx): accepted, and the session opens its account.
    if (checks.invite)
      return acceptAtSignIn(c, deps, checks.invite, { subject, email, emailVerified, authTime }, at);
    const accountId = await accountForSignIn(
      store,
      { subject, email, client: clientOf(c) },
      at.toISOString(),
    );
    // The address the balance watch's e-mails go to, as of this sign-in (Cognito's `email` scope).
    if (email && deps.watches) await deps.watches.rememberEmail(subject, email, at.toISOString());
    await startSession(c, store, { accountId, subject, authTime }, at);
    return c.redirect(checks.returnTo ?? '/dashboard/', 303);
  });

  app.post('/sign-out', async (c) => {
    await endSession(c, store);
    // Then out of the provider's sign-in too; should its discovery fail, our session is ended anyway.
    const provider = await deps.oidc().catch(() => undefined);
    return c.redirect(provider?.signOutUrl?.().href ?? '/dashboard/', 303);
  });

  inviteRoutes(app, deps, now);
  app.route('/', customerRoutes(deps, now));

  app.notFound((c) =>
    c.html(
      <MessagePage title="Not found" message="There is nothing at this address." signedIn={false} />,
      404,
    ),
  );
  app.onError((error, c) => {
    logger.error('dashboard: request failed', { error, path: c.req.path });
    return c.html(
      <MessagePage title="Something went wrong" message="Please try again in a moment." signedIn={false} />,
      500,
    );
  });
  return app;
}
