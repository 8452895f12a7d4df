/**
 * The Stripe calls the Billing profile and Invoices pages wait on (payments/account-customer.ts),
 * counted on the Stripe stand-in (`apiRequests()`), the dashboard on its own restricted key: each is
 * a round trip to api.stripe.com in AWS, so each page makes one while the account's remembered
 * Customer is there. The profile is one retrieve with the tax IDs expanded (the live check and the
 * profile at once); the invoices one list by the remembered id. Past a remembered Customer deleted in
 * Stripe: the profile page looks on as before (the saved card's Customer, then search) and remembers
 * what it finds; the Invoices page still lists the deleted one's invoices (Stripe keeps deleted
 * Customers and their invoices); a remembered id Stripe has no Customer by (`resource_missing`) is
 * looked past on both.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDashboardApp } from '../../../functions/dashboard/app.js';
import { stripeInvoicing } from '../../../functions/payments/invoicing.js';
import { stripeApi, stripeClient } from '../../../functions/payments/stripe-api.js';
import { type RunningStripeStandIn, startStripeStandIn } from '../../../lib/local/stripe/index.js';
import { localRestrictedKeys, localStripeKey } from '../../../lib/local/stripe/keys.js';
import { Browser } from '../../support/browser.js';
import { MemoryStore } from '../../support/memory-store.js';
import { MemoryWatchStore } from '../../support/memory-watch.js';
import { ORIGIN, StubOidc } from './support.js';

let standIn: RunningStripeStandIn;
/** The secret key's client, to set the scene in Stripe. */
const sdk = () => stripeClient({ apiKey: standIn.apiKey, apiBase: standIn.url });

beforeAll(async () => {
  standIn = await startStripeStandIn({ restrictedKeys: localRestrictedKeys() });
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
  const dashboardKey = stripeClient({ apiKey: localStripeKey('dashboard'), apiBase: standIn.url });
  const app = createDashboardApp({
    store,
    watches,
    oidc: async () => oidc,
    stripe: async () => stripeApi(dashboardKey),
    publicOrigin: ORIGIN,
    checkoutOrigins: [standIn.url],
    originVerify: async () => [],
  });
  browser = new Browser(async (url, init) => app.request(url.href, init));
  signIns += 1;
  const subject = `user-calls-${signIns}-${Date.now()}`;
  const start = await browser.fetch(`${ORIGIN}/dashboard/sign-in`);
  const state = new URL(String(start.headers.get('location'))).searchParams.get('state');
  oidc.codes.set(`code-${subject}`, subject);
  await browser.fetch(`${ORIGIN}/dashboard/callback?code=code-${subject}&state=${state}`);
  accountId = store.users.get(subject) as string;
  expect(accountId).toBeTruthy();
});

/** The page's body and the Stripe API requests it made, in order (`METHOD /v1/...?query`). */
async function visit(path: string): Promise<{ html: string; calls: string[] }> {
  const before = standIn.apiRequests().count;
  const response = await browser.fetch(`${ORIGIN}${path}`);
  const html = await response.text();
  expect(response.status).toBe(200);
  const after = standIn.apiRequests();
  return { html, calls: after.latest.slice(after.latest.length - (after.count - before)) };
}

/** A Customer of the account with a profile (one VAT ID) and one paid $25 invoice. */
async function customerWithProfile(name: string): Promise<string> {
  const invoicing = stripeInvoicing(sdk());
  const customer = (await sdk().customers.create({ metadata: { accountId } })).id;
  await invoicing.saveProfile(customer, accountId, {
    legalName: name,
    contacts: ['billing@example.com'],
    address: { line1: 'Hauptstr. 1', postalCode: '10115', city: 'Berlin', country: 'DE' },
    taxIds: [{ type: 'eu_vat', value: 'DE123456789' }],
    poNumber: 'PO-4711',
  });
  await invoicing.invoicePayment({
    customer,
    accountId,
    paymentIntent: `pi_${customer}`,
    amountCents: 2_500,
    description: 'API credits',
  });
  return customer;
}
const remember = (customer: string) =>
  store.rememberBillingCustomer(accountId, customer, new Date().toISOString());
const saveCardTo = (customer: string) =>
  watches.recordCard(accountId, { customer, paymentMethod: 'pm_1', from: 1 }, new Date().toISOString());

describe('the billing pages with the account Customer remembered', () => {
  it('reads the profile in one Stripe call: the Customer retrieved with its tax IDs', async () => {
    const customer = await customerWithProfile('Example GmbH');
    await remember(customer);
    const { html, calls } = await visit('/dashboard/billing/profile');
    expect(calls).toEqual([`GET /v1/customers/${customer}?expand[0]=tax_ids`]);
    expect(html).toContain('value="Example GmbH"');
    expect(html).toContain('value="DE123456789"');
    expect(html).toContain('value="PO-4711"');
    expect(html).toContain('billing@example.com');
  });

  it('lists the invoices in one Stripe call', async () => {
    const customer = await customerWithProfile('Example GmbH');
    await remember(customer);
    const { html, calls } = await visit('/dashboard/billing/invoices');
    expect(calls).toEqual([`GET /v1/invoices?customer=${customer}&limit=100`]);
    expect(html).toContain('$25.00');
  });
});

describe('the billing pages past a remembered Customer deleted in Stripe', () => {
  it("profile: reads the saved card's Customer instead, and remembers it", async () => {
    const gone = await customerWithProfile('Gone Ltd');
    const card = await customerWithProfile('Card GmbH');
    await remember(gone);
    await saveCardTo(card);
    await sdk().customers.del(gone);
    const { html, calls } = await visit('/dashboard/billing/profile');
    expect(html).toContain('value="Card GmbH"');
    expect(html).not.toContain('Gone Ltd');
    // The deleted one's stub, the card's Customer's live check (as the lookup has it), its profile.
    expect(calls).toEqual([
      `GET /v1/customers/${gone}?expand[0]=tax_ids`,
      `GET /v1/customers/${card}`,
      `GET /v1/customers/${card}?expand[0]=tax_ids`,
    ]);
    expect(store.billingCustomers.get(accountId)).toBe(card);
    // Remembered now: one call again.
    expect((await visit('/dashboard/billing/profile')).calls).toHaveLength(1);
  });

  it('profile: an empty form when no other Customer is found, the deleted one still remembered', async () => {
    const gone = await customerWithProfile('Gone Ltd');
    await remember(gone);
    await sdk().customers.del(gone);
    const { html, calls } = await visit('/dashboard/billing/profile');
    expect(html).not.toContain('Gone Ltd');
    expect(html).toContain('name="legal_name"');
    expect(calls).toHaveLength(2);
    expect(calls[1]).toMatch(/^GET \/v1\/customers\/search\?/);
    expect(store.billingCustomers.get(accountId)).toBe(gone);
  });

  it("invoices: still lists the deleted Customer's invoices, in one call, the Customer still remembered", async () => {
    const gone = await customerWithProfile('Gone Ltd');
    await remember(gone);
    await saveCardTo(await customerWithProfile('Card GmbH'));
    await sdk().customers.del(gone);
    const { html, calls } = await visit('/dashboard/billing/invoices');
    expect(calls).toEqual([`GET /v1/invoices?customer=${gone}&limit=100`]);
    expect(html).toContain('$25.00');
    expect(html).not.toContain('No invoices yet');
    expect(store.billingCustomers.get(accountId)).toBe(gone);
  });
});

describe('the billing pages past a remembered id Stripe has no Customer by', () => {
  it("invoices: lists the saved card's Customer's instead, and remembers it", async () => {
    const card = await customerWithProfile('Card GmbH');
    await remember('cus_unknownToStripe');
    await saveCardTo(card);
    const { html, calls } = await visit('/dashboard/billing/invoices');
    expect(calls).toEqual([
      'GET /v1/invoices?customer=cus_unknownToStripe&limit=100',
      `GET /v1/customers/${card}`,
      `GET /v1/invoices?customer=${card}&limit=100`,
    ]);
    expect(html).toContain('$25.00');
    expect(store.billingCustomers.get(accountId)).toBe(card);
    expect((await visit('/dashboard/billing/invoices')).calls).toHaveLength(1);
  });

  it('profile: an empty form when none is found, nothing remembered in its place', async () => {
    await remember('cus_unknownToStripe');
    const { html, calls } = await visit('/dashboard/billing/profile');
    expect(html).toContain('name="legal_name"');
    expect(calls[0]).toBe('GET /v1/customers/cus_unknownToStripe?expand[0]=tax_ids');
    expect(calls).toHaveLength(2);
    expect(store.billingCustomers.get(accountId)).toBe('cus_unknownToStripe');
  });

  it('invoices: none, without a Customer remembered or found', async () => {
    const { html, calls } = await visit('/dashboard/billing/invoices');
    expect(html).toContain('No invoices yet');
    // Nothing remembered, no card: search alone, as before.
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatch(/^GET \/v1\/customers\/search\?/);
  });
});
