/**
 * The account's Stripe Customer on the dashboard (payments/account-customer.ts) against the Stripe
 * stand-in with its default search lag (a minute: Stripe's customer search is eventually consistent
 * and not for read-after-write flows): a purchase through Checkout is on the Invoices page at once,
 * and the profile saved on the Checkout's Customer reads back at once, because the dashboard
 * remembers the Customer it made in its store. An account from before (its Customer in Stripe, none
 * remembered) is found by search once and remembered then; the card's Customer (the balance watch's)
 * likewise; a remembered Customer deleted in Stripe is replaced by the next one made (its invoices
 * listed until then).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDashboardApp } from '../../../functions/dashboard/app.js';
import { stripeApi, stripeClient } from '../../../functions/payments/stripe-api.js';
import { type RunningStripeStandIn, startStripeStandIn } from '../../../lib/local/stripe/index.js';
import { SEARCH_LAG_MS } from '../../../lib/local/stripe/state.js';
import { Browser } from '../../support/browser.js';
import { MemoryStore } from '../../support/memory-store.js';
import { MemoryWatchStore } from '../../support/memory-watch.js';
import { ORIGIN, StubOidc } from './support.js';

let standIn: RunningStripeStandIn;
const sdk = () => stripeClient({ apiKey: standIn.apiKey, apiBase: standIn.url });

beforeAll(async () => {
  standIn = await startStripeStandIn();
});
afterAll(async () => {
  await standIn?.close();
});

let store: MemoryStore;
let watches: MemoryWatchStore;
let browser: Browser;
let accountId: string;
let signIns = 0;

beforeEach(async () => {
  store = new MemoryStore();
  watches = new MemoryWatchStore();
  const oidc = new StubOidc({ now: new Date() });
  const app = createDashboardApp({
    store,
    watches,
    oidc: async () => oidc,
    stripe: async () => stripeApi(sdk()),
    publicOrigin: ORIGIN,
    checkoutOrigins: [standIn.url],
    originVerify: async () => [],
  });
  browser = new Browser(async (url, init) => app.request(url.href, init));
  signIns += 1;
  const subject = `user-customer-${signIns}-${Date.now()}`;
  const start = await browser.fetch(`${ORIGIN}/dashboard/sign-in`);
  const state = new URL(String(start.headers.get('location'))).searchParams.get('state');
  oidc.codes.set(`code-${subject}`, subject);
  await browser.fetch(`${ORIGIN}/dashboard/callback?code=code-${subject}&state=${state}`);
  accountId = store.users.get(subject) as string;
  expect(accountId).toBeTruthy();
});

const post = (path: string, form: Record<string, string>) =>
  browser.fetch(`${ORIGIN}${path}`, { form, origin: ORIGIN });
const page = async (path: string) => {
  const response = await browser.fetch(`${ORIGIN}${path}`);
  expect(response.status).toBe(200);
  return response.text();
};
/** Buys $10 through Checkout and pays it on the stand-in; the session's Customer. */
async function buy(): Promise<string> {
  const redirect = await post('/dashboard/billing/checkout', { amount: '1000' });
  expect(redirect.status).toBe(303);
  const sessionId = String(redirect.headers.get('location')).split('/checkout/')[1] as string;
  const paid = await standIn.stripe.pay(sessionId);
  return String(paid.customer);
}
/** What Stripe's search finds for the account now. */
const searched = async () =>
  (await sdk().customers.search({ query: `metadata['accountId']:'${accountId}'` })).data.map((c) => c.id);
const customersOfAccount = () =>
  [...standIn.stripe.customers.values()].filter(
    (c) => (c.metadata as Record<string, string> | undefined)?.accountId === accountId,
  );

const PROFILE = {
  legal_name: 'Example GmbH',
  contacts: 'billing@example.com',
  line1: 'Hauptstr. 1',
  postal_code: '10115',
  city: 'Berlin',
  country: 'DE',
  po_number: 'PO-4711',
};

describe("the account's Stripe Customer, with Stripe's search a minute behind", () => {
  it('lists a purchase on Invoices at once, and reads the profile saved on its Customer at once', async () => {
    const customer = await buy();
    // Stripe's search does not have it yet: the page must not depend on it.
    expect(await searched()).toEqual([]);
    expect(store.billingCustomers.get(accountId)).toBe(customer);
    const invoices = await page('/dashboard/billing/invoices');
    expect(invoices).not.toContain('No invoices yet');
    expect(invoices).toContain('$10.00');
    expect(invoices).toMatch(/href="[^"]+\/pdf"/);

    const saved = await post('/dashboard/billing/profile', PROFILE);
    expect(saved.status).toBe(303);
    const profile = await page('/dashboard/billing/profile?saved=1');
    expect(profile).toContain('value="Example GmbH"');
    expect(profile).toContain('value="PO-4711"');
    // On the Checkout's Customer: one Customer for the account, still not searchable.
    expect(customersOfAccount().map((c) => c.id)).toEqual([customer]);
    expect(standIn.stripe.customers.get(customer)).toMatchObject({ name: 'Example GmbH' });
    expect(await searched()).toEqual([]);
  });

  it('reads a profile back at once when saving it made the Customer, and buys as that Customer', async () => {
    expect((await post('/dashboard/billing/profile', PROFILE)).status).toBe(303);
    const remembered = store.billingCustomers.get(accountId) as string;
    expect(remembered).toMatch(/^cus_/);
    expect(await page('/dashboard/billing/profile')).toContain('value="Example GmbH"');
    expect(await buy()).toBe(remembered);
    expect(await page('/dashboard/billing/invoices')).toContain('$10.00');
  });

  it('finds the Customer of an account from before by search, once search has it, and remembers it', async () => {
    const before = await sdk().customers.create({ metadata: { accountId } });
    // None remembered and search not caught up: nothing to show yet, and nothing remembered.
    expect(await page('/dashboard/billing/invoices')).toContain('No invoices yet');
    expect(store.billingCustomers.has(accountId)).toBe(false);
    await standIn.stripe.advance(SEARCH_LAG_MS);
    await page('/dashboard/billing/invoices');
    expect(store.billingCustomers.get(accountId)).toBe(before.id);
    expect(await buy()).toBe(before.id);
  });

  it("remembers the saved card's Customer (the balance watch's) when it is the one found", async () => {
    const card = await sdk().customers.create({});
    await watches.recordCard(
      accountId,
      { customer: card.id, paymentMethod: 'pm_1', from: 1 },
      new Date().toISOString(),
    );
    await page('/dashboard/billing/profile');
    expect(store.billingCustomers.get(accountId)).toBe(card.id);
  });

  it('passes over a remembered Customer deleted in Stripe, and remembers the next one made in its place', async () => {
    const first = await buy();
    await sdk().customers.del(first);
    // Reading finds no other (the deleted one is not searchable either) and leaves it remembered;
    // its invoice, issued to the account, is still listed by its id (Stripe keeps deleted Customers).
    expect(await page('/dashboard/billing/invoices')).toContain('$10.00');
    expect(store.billingCustomers.get(accountId)).toBe(first);
    const second = await buy();
    expect(second).not.toBe(first);
    expect(store.billingCustomers.get(accountId)).toBe(second);
    expect(await page('/dashboard/billing/invoices')).toContain('$10.00');
  });
});
