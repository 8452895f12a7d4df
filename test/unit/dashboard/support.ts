/**
 * The dashboard application in process (its `app.request`), over the in-memory store, with stand-ins
 * for its two outside boundaries: the OpenID provider (a code maps to a subject; the state must be
 * the one sent, as openid-client checks it) and Stripe (Checkout Sessions recorded, never paid).
 */
import type Stripe from 'stripe';
import { createDashboardApp } from '../../../functions/dashboard/app.js';
import { type OidcClient, type SignInChecks, SignInError } from '../../../functions/dashboard/oidc.js';
import type { StripeApi } from '../../../functions/payments/stripe-api.js';
import { Browser } from '../../support/browser.js';
import { MemoryStore } from '../../support/memory-store.js';
import type { MemoryWatchStore } from '../../support/memory-watch.js';

export const ORIGIN = 'https://dashboard.example.com';
export const IDP = 'https://idp.example.com';

export class StubOidc implements OidcClient {
  /** What each code the provider hands out signs in as. */
  readonly codes = new Map<string, string>();
  /** Each subject's e-mail in its ID tokens (default `<subject>@example.com`, verified). */
  readonly emails = new Map<string, string>();
  /** Subjects whose ID tokens say `email_verified: false`. */
  readonly unverified = new Set<string>();
  /** The auth_time of the next ID tokens (epoch seconds); unset: the clock's now, as at a sign-in. */
  authTime: number | undefined;
  /** The options of each begin, in order. */
  readonly begun: { fresh?: boolean }[] = [];
  constructor(private readonly clock: { now: Date }) {}
  private counter = 0;
  async begin(options: { fresh?: boolean } = {}) {
    this.begun.push(options);
    this.counter += 1;
    const checks = {
      codeVerifier: `verifier-${this.counter}`,
      state: `state-${this.counter}`,
      nonce: `n-${this.counter}`,
    };
    const url = new URL(`${IDP}/authorize`);
    url.searchParams.set('state', checks.state);
    if (options.fresh) url.searchParams.set('max_age', '0');
    return { url, checks };
  }
  async finish(callbackUrl: URL, checks: SignInChecks) {
    if (!callbackUrl.href.startsWith(`${ORIGIN}/dashboard/callback?`))
      throw new SignInError('wrong redirect URI');
    if (callbackUrl.searchParams.get('state') !== checks.state) throw new SignInError('state mismatch');
    const subject = this.codes.get(callbackUrl.searchParams.get('code') ?? '');
    if (!subject) throw new SignInError('unknown code');
    this.codes.delete(callbackUrl.searchParams.get('code') ?? '');
    return {
      subject,
      email: this.emails.get(subject) ?? `${subject}@example.com`,
      ...(this.unverified.has(subject) ? {} : { emailVerified: true }),
      authTime: this.authTime ?? Math.floor(this.clock.now.getTime() / 1000),
    };
  }
}

export class StubStripe implements StripeApi {
  readonly sessions: Stripe.Checkout.SessionCreateParams[] = [];
  async createCheckoutSession(params: Stripe.Checkout.SessionCreateParams) {
    this.sessions.push(params);
    return {
      id: `cs_test_${this.sessions.length}`,
      url: `https://checkout.stripe.com/c/pay/cs_test_${this.sessions.length}`,
    };
  }
  /** Paid sessions: the PaymentIntent each was paid with (none: not paid yet). */
  readonly paid = new Map<string, string>();
  async retrieveCheckoutSession(id: string) {
    const index = Number(id.replace('cs_test_', '')) - 1;
    const params = this.sessions[index];
    if (!params) throw new Error(`no such checkout session ${id}`);
    const intent = this.paid.get(id);
    return {
      id,
      ...(params.client_reference_id ? { accountId: params.client_reference_id } : {}),
      ...(intent ? { paymentIntent: intent } : {}),
      amountTotal:
        (params.line_items?.[0]?.price_data?.unit_amount ?? 0) * (params.line_items?.[0]?.quantity ?? 1),
    };
  }
  async retrievePaymentIntent(): Promise<never> {
    throw new Error('not used by the dashboard');
  }
  async listRefunds(): Promise<never> {
    throw new Error('not used by the dashboard');
  }
}

export function dashboard(
  options: { originVerify?: string[]; keyDailyCaps?: boolean; watches?: MemoryWatchStore } = {},
) {
  const store = new MemoryStore();
  const clock = { now: new Date('2025-06-01T12:00:00Z') };
  const oidc = new StubOidc(clock);
  const stripe = new StubStripe();
  const app = createDashboardApp({
    store,
    oidc: async () => oidc,
    stripe: async () => stripe,
    publicOrigin: ORIGIN,
    checkoutOrigins: ['https://checkout.stripe.com'],
    originVerify: async () => options.originVerify ?? [],
    now: () => clock.now,
    ...(options.keyDailyCaps ? { keyDailyCaps: true } : {}),
    ...(options.watches ? { watches: options.watches } : {}),
  });
  const send = async (url: URL, init: RequestInit) => app.request(url.href, init);
  const browser = () => new Browser(send);

  /** Signs `browser` in as `subject` through the sign-in and callback routes; the callback's response. */
  async function signIn(b: Browser, subject: string): Promise<Response> {
    const start = await b.fetch(`${ORIGIN}/dashboard/sign-in`);
    const location = new URL(String(start.headers.get('location')));
    const code = `code-${subject}-${Math.random()}`;
    oidc.codes.set(code, subject);
    return b.fetch(
      `${ORIGIN}/dashboard/callback?code=${encodeURIComponent(code)}&state=${location.searchParams.get('state')}`,
    );
  }
  /**
   * Accepts an invitation link (`/dashboard/invite/<account>/<invitation>/<token>`) in `b` as `subject`:
   * the Accept form's POST, the provider, the callback; the callback's response.
   */
  async function accept(b: Browser, link: string, subject: string): Promise<Response> {
    const [accountId = '', invitationId = '', token = ''] = new URL(link).pathname.split('/').slice(3);
    const start = await b.fetch(`${ORIGIN}/dashboard/invite/accept`, {
      form: { accountId, invitationId, token },
      origin: ORIGIN,
    });
    const location = new URL(String(start.headers.get('location')));
    const code = `code-${subject}-${Math.random()}`;
    oidc.codes.set(code, subject);
    return b.fetch(
      `${ORIGIN}/dashboard/callback?code=${encodeURIComponent(code)}&state=${location.searchParams.get('state')}`,
    );
  }
  /** A POST of a form as the dashboard's own page sends it. */
  const post = (b: Browser, path: string, form: Record<string, string>, origin = ORIGIN) =>
    b.fetch(`${ORIGIN}${path}`, { form, origin });
  const get = async (b: Browser, path: string) => {
    const response = await b.fetch(`${ORIGIN}${path}`);
    return { status: response.status, body: await response.text(), response };
  };
  return { app, store, oidc, stripe, clock, browser, signIn, accept, post, get, send };
}

export const accountOf = (store: MemoryStore, subject: string) => store.users.get(subject) as string;
