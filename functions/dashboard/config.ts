/**
 * The dashboard function's settings, from its environment (read at the first request of an instance):
 *
 * - DASHBOARD_ORIGIN: the dashboard's public origin (`https://<distribution domain>`, locally
 *   `http://127.0.0.1:8787`). Behind CloudFront the request's Host is the Function URL's, so the CSRF
 *   check and the OpenID redirect URI (`<origin>/dashboard/callback`) are built from this, never from it.
 * - OIDC_ISSUER, OIDC_CLIENT_ID and the client's secret (OIDC_CLIENT_SECRET_ARN: a Secrets Manager
 *   secret holding it as plain text; locally OIDC_CLIENT_SECRET): Cognito's user pool
 *   (`https://cognito-idp.<region>.amazonaws.com/<pool id>`) and its app client on AWS, the local
 *   OpenID provider (lib/local/oidc.ts) locally. One code path: discovery from the issuer.
 * - OIDC_SIGN_OUT_ORIGIN: Cognito's managed login domain, where sign-out sends the browser (its
 *   `/logout`); locally unset, the issuer's origin.
 * - Stripe: its own restricted key (functions/payments/config.ts stripeSettings): STRIPE_SECRET_ARN
 *   (the dashboard's own secret), or locally STRIPE_API_KEY and STRIPE_API_BASE (the stand-in).
 * - DASHBOARD_TABLE (functions/adapters/dynamodb/dashboard.ts) and the four tables of the store.
 */
import { getSecretString } from '../adapters/secrets.js';
import type { StripeNetwork } from '../payments/stripe-api.js';

export interface OidcSettings {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** `<DASHBOARD_ORIGIN>/dashboard/callback`: registered with the provider as the app client's callback. */
  redirectUri: string;
}

class DashboardNotConfiguredError extends Error {
  constructor(what: string) {
    super(`The dashboard is not configured: ${what}`);
    this.name = 'DashboardNotConfiguredError';
  }
}

/** The public origin, normalised (`https://example.com`, no path), or a thrown error naming the variable. */
export function publicOrigin(env: NodeJS.ProcessEnv = process.env): string {
  const value = env.DASHBOARD_ORIGIN;
  if (!value) throw new DashboardNotConfiguredError('set DASHBOARD_ORIGIN (the public origin)');
  return new URL(value).origin;
}

export async function oidcSettings(env: NodeJS.ProcessEnv = process.env): Promise<OidcSettings> {
  const issuer = env.OIDC_ISSUER;
  const clientId = env.OIDC_CLIENT_ID;
  if (!issuer || !clientId) throw new DashboardNotConfiguredError('set OIDC_ISSUER and OIDC_CLIENT_ID');
  const clientSecret = env.OIDC_CLIENT_SECRET_ARN
    ? (await getSecretString(env.OIDC_CLIENT_SECRET_ARN)).trim()
    : env.OIDC_CLIENT_SECRET;
  if (!clientSecret)
    throw new DashboardNotConfiguredError('set OIDC_CLIENT_SECRET_ARN (or OIDC_CLIENT_SECRET locally)');
  return { issuer, clientId, clientSecret, redirectUri: `${publicOrigin(env)}/dashboard/callback` };
}

/**
 * Where the sign-out form's redirect goes (the provider's `/logout`, functions/dashboard/oidc.ts), for
 * the pages' CSP `form-action`: OIDC_SIGN_OUT_ORIGIN (Cognito's managed login domain, which is not the
 * issuer's host), else the issuer's origin (the local provider serves both).
 */
export function signOutOrigin(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const at = env.OIDC_SIGN_OUT_ORIGIN || env.OIDC_ISSUER;
  return at ? new URL(at).origin : undefined;
}

/**
 * Where a Checkout form may send the browser (the page's CSP `form-action`: Chrome applies it to the
 * redirect that follows a form's POST): Stripe's hosted checkout, and locally the stand-in's origin.
 */
export function checkoutOrigins(env: NodeJS.ProcessEnv = process.env): string[] {
  const origins = ['https://checkout.stripe.com'];
  if (env.STRIPE_API_BASE) origins.push(new URL(env.STRIPE_API_BASE).origin);
  return origins;
}

/**
 * The dashboard's Stripe calls (a Checkout Session made, one read on the success page) fit inside its
 * function's 10 s timeout (lib/infra/function-settings.ts): 3 s an attempt and one retry, 6.5 s at
 * worst with the SDK's pause, so a slow Stripe gets the dashboard's own error page, with room for the
 * secret and database reads around the call, rather than CloudFront's 502 when Lambda stops it.
 */
export const DASHBOARD_STRIPE_NETWORK: StripeNetwork = { timeoutMs: 3_000, maxNetworkRetries: 1 };
