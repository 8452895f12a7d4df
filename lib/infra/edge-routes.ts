/**
 * How CloudFront reaches each function: which paths go to it (the distribution's behaviours, first
 * match wins, the default last), derived from the route table (functions/shared/routes.ts), its
 * Function URL's auth type, whether CloudFront signs the origin request with an origin access control
 * (OAC) and how, and whether it adds the secret origin header. The stack (api-stack.ts) builds the Function URLs and the distribution from
 * this table, and the local emulator (lib/local/cloudfront.ts) behaves as this configuration behaves
 * in AWS, so that a test through the emulator exercises the deployed setup.
 *
 * No CDK import here: the emulator loads this module too.
 */
import { type ApiFunction, ROUTES, type Route } from '../../functions/shared/routes.js';

/**
 * The functions behind the distribution: the API's (its route table), and the site's beside it: the
 * payments function, Stripe's webhook, and the customers' dashboard. The API key check at the edge
 * (edge-function.ts) is the API's: the site's behaviours do not run it (KEY_CHECKED); with a custom domain the
 * dashboard's run their own, which redirects another host name to it (dashboardHostCode).
 */
export type EdgeFunction = ApiFunction | 'payments' | 'dashboard';

/** Where Stripe posts its events: the payments function's one path (edge-waf.ts leaves it out of the rate rule). */
export const STRIPE_WEBHOOK_PATH = '/stripe/webhook';

/** The site's paths (not API routes): each its function, matched after the API's. */
const SITE_BEHAVIOURS: readonly { pathPattern: string; fn: Exclude<EdgeFunction, ApiFunction> }[] = [
  // Stripe posts its events here (docs/deploy.md, "Connecting Stripe"); the signature authenticates them.
  { pathPattern: STRIPE_WEBHOOK_PATH, fn: 'payments' },
  // The dashboard (functions/dashboard/): its pages, sign-in callback, forms and stylesheet. Deployed
  // only where its origin is a literal, a custom domain or a sandbox's dashboardOrigin
  // (lib/infra/dashboard.ts says why); without one the stack leaves these two out, and /dashboard is
  // an unknown path of the default behaviour (the API's).
  { pathPattern: '/dashboard', fn: 'dashboard' },
  { pathPattern: '/dashboard/*', fn: 'dashboard' },
];

/** Whether the viewer-request function (the API key check, the 413) runs on a function's behaviours. */
export const KEY_CHECKED: Readonly<Record<EdgeFunction, boolean>> = {
  completions: true,
  models: true,
  payments: false,
  // A browser carries a session cookie, not an API key: the dashboard authenticates its own requests.
  dashboard: false,
};

export interface OriginSetup {
  /**
   * The Function URL's AuthType. `AWS_IAM`: Lambda refuses (403) any request not SigV4-signed by a
   * principal the function's resource policy allows; `NONE`: Lambda invokes the function for anyone.
   */
  urlAuthType: 'NONE' | 'AWS_IAM';
  /**
   * CloudFront signs the origin request with SigV4 (an origin access control) with this
   * SigningBehavior; absent, no OAC. `always` signs every request and overwrites the viewer's
   * `Authorization` header; `no-override` signs only a request that has none.
   */
  originAccessControl?: 'always' | 'no-override';
  /** CloudFront adds `x-origin-verify` with the origin secret, which the function checks (403 without it). */
  originHeader: boolean;
}

/**
 * Each function's origin as deployed: both URLs auth type NONE, behind the secret origin header that
 * the functions check. Not an OAC for the account URL: its function reads the customer's key from
 * `Authorization`, which `always` overwrites with CloudFront's signature, and which `no-override`
 * passes along unsigned, which an AWS_IAM URL refuses. Not an OAC for completions either: Lambda then
 * needs the viewer to send the SHA-256 of a POST body (`x-amz-content-sha256`), which OpenAI's SDKs
 * never do.
 */
export const EDGE_ORIGINS: Readonly<Record<EdgeFunction, OriginSetup>> = {
  completions: { urlAuthType: 'NONE', originHeader: true },
  models: { urlAuthType: 'NONE', originHeader: true },
  // The webhook checks x-origin-verify too (functions/payments/handler.ts), before Stripe's signature:
  // its bare URL is a 403, so every request it serves has come through WAF and its rate rule.
  payments: { urlAuthType: 'NONE', originHeader: true },
  // The dashboard checks x-origin-verify as the API's functions do (functions/dashboard/app.tsx): 403
  // on its bare URL. Not an OAC: its forms are POSTs whose bodies the browser does not hash.
  dashboard: { urlAuthType: 'NONE', originHeader: true },
};

/** The function of CloudFront's default behaviour: every path no other behaviour matches (its 404 too). */
export const DEFAULT_FUNCTION: EdgeFunction = 'models';

/** A route's CloudFront path patterns: with and without a trailing slash, as every route; a prefix and anything under it. */
const pathPatterns = (route: Route) => (route.prefix ? [`${route.path}*`] : [route.path, `${route.path}/`]);

/**
 * The distribution's path behaviours, in the route table's order: one for each path of a route that
 * another function than the default serves; then the site's.
 */
export const EDGE_BEHAVIOURS: readonly { pathPattern: string; fn: EdgeFunction }[] = [
  ...new Map(
    Object.values<Route>(ROUTES)
      .filter((route) => route.fn !== DEFAULT_FUNCTION)
      .flatMap((route) => pathPatterns(route).map((pathPattern) => [pathPattern, route.fn] as const)),
  ),
]
  .map(([pathPattern, fn]): { pathPattern: string; fn: EdgeFunction } => ({ pathPattern, fn }))
  .concat(SITE_BEHAVIOURS);

/**
 * CloudFront's path pattern match (Developer Guide, "Path pattern" of a cache behavior): the whole
 * path, case-sensitive, where `*` matches any run of characters and `?` exactly one.
 */
function matchesPathPattern(pattern: string, path: string): boolean {
  const source = pattern
    .split('')
    .map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[.+^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(`^${source}$`).test(path);
}

/** The function a path reaches through the distribution. */
export function edgeFunctionFor(path: string): EdgeFunction {
  return EDGE_BEHAVIOURS.find((b) => matchesPathPattern(b.pathPattern, path))?.fn ?? DEFAULT_FUNCTION;
}
