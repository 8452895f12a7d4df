/**
 * A slow Stripe (the stand-in answering no API call in time) gets the dashboard's own error page,
 * inside the dashboard function's timeout: its Stripe client (DASHBOARD_STRIPE_NETWORK) gives up
 * after 3 s an attempt and one retry, never CloudFront's 502 at Lambda's timeout: on the buy form,
 * the Billing profile and Invoices.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDashboardApp } from '../../../functions/dashboard/app.js';
import { DASHBOARD_STRIPE_NETWORK } from '../../../functions/dashboard/config.js';
import { stripeApi, stripeClient, stripeWorstCaseMs } from '../../../functions/payments/stripe-api.js';
import { FUNCTION_SETTINGS } from '../../../lib/infra/function-settings.js';
import { type RunningStripeStandIn, startStripeStandIn } from '../../../lib/local/stripe/index.js';
import { Browser } from '../../support/browser.js';
import { MemoryStore } from '../../support/memory-store.js';
import { ORIGIN, StubOidc } from './support.js';

const FUNCTION_TIMEOUT_MS = FUNCTION_SETTINGS.dashboard.timeoutSeconds * 1000;
/** Left of the function's timeout for the secret and database reads around the Stripe call. */
const MARGIN_MS = 2_000;

let standIn: RunningStripeStandIn;
beforeAll(async () => {
  standIn = await startStripeStandIn();
});
afterAll(async () => {
  await standIn?.close();
});

describe("the dashboard's Stripe calls", () => {
  it("fit inside the function's timeout at worst, with room to spare", () => {
    expect(stripeWorstCaseMs(DASHBOARD_STRIPE_NETWORK)).toBe(6_500);
    expect(stripeWorstCaseMs(DASHBOARD_STRIPE_NETWORK)).toBeLessThanOrEqual(FUNCTION_TIMEOUT_MS - MARGIN_MS);
  });

  it("a Stripe that never answers: the buy form gets the dashboard's error page within the function's timeout", async () => {
    const store = new MemoryStore();
    const oidc = new StubOidc({ now: new Date() });
    const api = stripeApi(
      stripeClient({ apiKey: standIn.apiKey, apiBase: standIn.url, network: DASHBOARD_STRIPE_NETWORK }),
    );
    const app = createDashboardApp({
      store,
      oidc: async () => oidc,
      stripe: async () => api,
      publicOrigin: ORIGIN,
      checkoutOrigins: ['https://checkout.stripe.com', standIn.url],
      originVerify: async () => [],
    });
    const browser = new Browser(async (url, init) => app.request(url.href, init));
    const start = await browser.fetch(`${ORIGIN}/dashboard/sign-in`);
    const state = new URL(String(start.headers.get('location'))).searchParams.get('state');
    oidc.codes.set('code-slow', 'user-slow');
    await browser.fetch(`${ORIGIN}/dashboard/callback?code=code-slow&state=${state}`);

    // Stripe answering at once: the buy form goes to Checkout.
    const quick = await browser.fetch(`${ORIGIN}/dashboard/billing/checkout`, {
      form: { amount: '1000' },
      origin: ORIGIN,
    });
    expect(quick.status).toBe(303);
    expect(String(quick.headers.get('location'))).toMatch(new RegExp(`^${standIn.url}/checkout/cs_test_`));
    const sessions = standIn.stripe.sessions.size;

    // Stripe answering later than the function lives.
    standIn.setApiDelay(FUNCTION_TIMEOUT_MS * 2);
    try {
      const started = performance.now();
      const slow = await browser.fetch(`${ORIGIN}/dashboard/billing/checkout`, {
        form: { amount: '1000' },
        origin: ORIGIN,
      });
      const elapsed = performance.now() - started;
      expect(slow.status).toBe(500);
      expect(await slow.text()).toContain('Something went wrong');
      expect(elapsed).toBeLessThan(FUNCTION_TIMEOUT_MS - MARGIN_MS);
      // Both attempts timed out, each dropped before the stand-in made a session.
      expect(standIn.stripe.sessions.size).toBe(sessions);
      // The pages that read Stripe (the account's Customer is remembered from the checkout above):
      // the same error page, inside the same bound.
      for (const page of ['/dashboard/billing/profile', '/dashboard/billing/invoices']) {
        const t0 = performance.now();
        const answer = await browser.fetch(`${ORIGIN}${page}`);
        expect(answer.status, page).toBe(500);
        expect(await answer.text()).toContain('Something went wrong');
        expect(performance.now() - t0, page).toBeLessThan(FUNCTION_TIMEOUT_MS - MARGIN_MS);
      }
    } finally {
      standIn.setApiDelay(0);
    }
  }, 40_000);
});
