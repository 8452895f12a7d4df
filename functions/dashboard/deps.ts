/**
 * What the dashboard's app (app.tsx) and its routes are given, and the context a signed-in route reads
 * (its session), in a file of their own so that the routes need not import the app that mounts them.
 */
import type { DashboardSession, Store } from '../core/store.js';
import type { Member } from '../core/team.js';
import type { WatchStore } from '../core/watch.js';
import type { StripeApi } from '../payments/stripe-api.js';
import type { OidcClient } from './oidc.js';

export interface DashboardDeps {
  store: Store;
  /**
   * The balance watch's items (functions/core/watch.ts): the Billing page's low-balance alert and auto
   * top-up, and the signed-in user's e-mail address (the ID token's) they are sent to. Absent: no such
   * settings on the page.
   */
  watches?: WatchStore;
  /** The OpenID client (made once per instance, at its first sign-in). */
  oidc: () => Promise<OidcClient>;
  stripe: () => Promise<StripeApi>;
  /** The dashboard's public origin (`https://example.com`): the CSRF check and all absolute URLs. */
  publicOrigin: string;
  /** Where the buy form may redirect the browser (CSP form-action): Stripe's checkout origin(s). */
  checkoutOrigins: readonly string[];
  /** Where the sign-out form's redirect goes (CSP form-action): the identity provider's origin. */
  signOutOrigin?: string | undefined;
  /** The accepted `x-origin-verify` values; none: no check (local use). */
  originVerify: () => Promise<string[]>;
  /**
   * Per-key daily spend caps on (KEY_DAILY_CAPS=on, shared/env.ts): Settings → API shows each key's cap
   * and its form. Off or absent (the default): no cap column, no form, and the cap's POST is a 404.
   */
  keyDailyCaps?: boolean;
  now?: () => Date;
}

/**
 * A signed-in route's context: the session, and the session's member of its account as read at this
 * request (team-access.tsx), with the person's other memberships for the header's account switcher
 * (read for pages only: a GET).
 */
export type DashboardEnv = {
  Variables: { session: DashboardSession; member: Member; memberships?: Member[] };
};
