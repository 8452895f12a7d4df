/**
 * The Stripe stand-in's customer search (lib/local/stripe/customers.ts) through the real `stripe` SDK:
 * as eventually consistent as Stripe's, never kinder. A Customer's creation or change is searchable
 * only once it is `searchLagMs` old on the stand-in's clock (a minute by default, Stripe's bound);
 * until then a new Customer is not found and a changed one is found by what it was. The lag is an
 * option of startStripeStandIn and a runtime setting (setSearchLag, /_stand-in/search-lag).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stripeClient } from '../../../functions/payments/stripe-api.js';
import { type RunningStripeStandIn, startStripeStandIn } from '../../../lib/local/stripe/index.js';
import { SEARCH_LAG_MS } from '../../../lib/local/stripe/state.js';

let standIn: RunningStripeStandIn;
const sdk = (of = standIn) => stripeClient({ apiKey: of.apiKey, apiBase: of.url });
/** The ids search finds by the metadata `accountId`. */
const searchIds = async (accountId: string, of = standIn) =>
  (await sdk(of).customers.search({ query: `metadata['accountId']:'${accountId}'` })).data.map((c) => c.id);

beforeAll(async () => {
  standIn = await startStripeStandIn();
});
afterAll(async () => {
  await standIn?.close();
});

describe("the stand-in's customer search", () => {
  it('lags a minute by default, as Stripe says it may', () => {
    expect(SEARCH_LAG_MS).toBe(60_000);
    expect(standIn.stripe.searchLagMs).toBe(SEARCH_LAG_MS);
  });

  it("finds a new Customer only once the clock is past the lag, in Stripe's shape", async () => {
    const customer = await sdk().customers.create({ metadata: { accountId: 'acct-new' } });
    expect(await searchIds('acct-new')).toEqual([]);
    // A second short of the lag (the wall clock moves on a little meanwhile): still not there.
    await standIn.stripe.advance(SEARCH_LAG_MS - 1_000);
    expect(await searchIds('acct-new')).toEqual([]);
    // Retrieval is consistent at once, as Stripe's is.
    expect((await sdk().customers.retrieve(customer.id)).id).toBe(customer.id);
    await standIn.stripe.advance(1_000);
    const found = await sdk().customers.search({ query: `metadata['accountId']:'acct-new'` });
    expect(found).toMatchObject({ object: 'search_result', has_more: false, url: '/v1/customers/search' });
    expect(found.data.map((c) => c.id)).toEqual([customer.id]);
    expect(found.data[0]).toMatchObject({ object: 'customer', metadata: { accountId: 'acct-new' } });
  });

  it('finds a changed Customer by what it was until the change is past the lag, and a deleted one never', async () => {
    const customer = await sdk().customers.create({ metadata: { accountId: 'acct-before' } });
    await standIn.stripe.advance(SEARCH_LAG_MS);
    await sdk().customers.update(customer.id, { name: 'Renamed', metadata: { accountId: 'acct-after' } });
    // The index still has the version before the change; the Customer comes back as it is now.
    const stale = await sdk().customers.search({ query: `metadata['accountId']:'acct-before'` });
    expect(stale.data.map((c) => c.id)).toEqual([customer.id]);
    expect(stale.data[0]).toMatchObject({ name: 'Renamed', metadata: { accountId: 'acct-after' } });
    expect(await searchIds('acct-after')).toEqual([]);
    await standIn.stripe.advance(SEARCH_LAG_MS);
    expect(await searchIds('acct-before')).toEqual([]);
    expect(await searchIds('acct-after')).toEqual([customer.id]);
    await sdk().customers.del(customer.id);
    expect(await searchIds('acct-after')).toEqual([]);
  });

  it("lags Checkout's own Customers too (customer_creation: always)", async () => {
    const session = await sdk().checkout.sessions.create({
      mode: 'payment',
      customer_creation: 'always',
      line_items: [
        { quantity: 1, price_data: { currency: 'usd', unit_amount: 1_000, product_data: { name: 'x' } } },
      ],
      success_url: 'http://127.0.0.1/ok',
    });
    const paid = await standIn.stripe.pay(session.id);
    const customer = String(paid.customer);
    await sdk().customers.update(customer, { metadata: { accountId: 'acct-checkout' } });
    expect(await searchIds('acct-checkout')).toEqual([]);
    await standIn.stripe.advance(SEARCH_LAG_MS);
    expect(await searchIds('acct-checkout')).toEqual([customer]);
  });

  it('takes its lag as an option, and changes it at runtime (a method and a control)', async () => {
    const quick = await startStripeStandIn({ searchLagMs: 0 });
    try {
      const customer = await sdk(quick).customers.create({ metadata: { accountId: 'acct-quick' } });
      expect(await searchIds('acct-quick', quick)).toEqual([customer.id]);
      quick.setSearchLag(3_600_000);
      expect(await searchIds('acct-quick', quick)).toEqual([]);
      const control = await fetch(`${quick.url}/_stand-in/search-lag`, {
        method: 'POST',
        body: JSON.stringify({ ms: 0 }),
      });
      expect(await control.json()).toEqual({ searchLagMs: 0 });
      expect(await searchIds('acct-quick', quick)).toEqual([customer.id]);
    } finally {
      await quick.close();
    }
  });
});
