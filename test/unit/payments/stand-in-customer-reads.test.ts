/**
 * The reads the billing pages make, on the Stripe stand-in as Stripe answers them: a Customer's
 * retrieval with `expand[]=tax_ids` (an includable field: absent unless expanded, embedded as a list
 * object of its first 10), a deleted Customer's stub, invoices listed by a deleted Customer's id (they
 * outlive it) or refused for an id Stripe never had; and invoicing.ts on them: the profile in one call
 * while it has at most 10 tax IDs (paged past them), undefined for a Customer Stripe no longer has.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stripeInvoicing } from '../../../functions/payments/invoicing.js';
import { stripeClient } from '../../../functions/payments/stripe-api.js';
import { type RunningStripeStandIn, startStripeStandIn } from '../../../lib/local/stripe/index.js';
import { localRestrictedKeys, localStripeKey } from '../../../lib/local/stripe/keys.js';

let standIn: RunningStripeStandIn;
const sdk = (apiKey = standIn.apiKey) => stripeClient({ apiKey, apiBase: standIn.url });
/** The stand-in's JSON for a GET, as the wire has it (the SDK adds nothing to read it by). */
const get = async (path: string, apiKey = standIn.apiKey) => {
  const response = await fetch(`${standIn.url}${path}`, { headers: { authorization: `Bearer ${apiKey}` } });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
};
/** The API requests `run` made. */
async function requestsOf(run: () => Promise<unknown>): Promise<string[]> {
  const before = standIn.apiRequests().count;
  await run();
  const after = standIn.apiRequests();
  return after.latest.slice(after.latest.length - (after.count - before));
}

beforeAll(async () => {
  standIn = await startStripeStandIn({
    restrictedKeys: { ...localRestrictedKeys(), rk_test_invoices_only: { invoices: 'read' } },
  });
});
afterAll(async () => {
  await standIn?.close();
});

describe("a Customer's retrieval on the stand-in", () => {
  it('leaves tax_ids out unless expanded, and embeds them as a list when expanded', async () => {
    const customer = await sdk().customers.create({ name: 'Example GmbH' });
    await sdk().customers.createTaxId(customer.id, { type: 'eu_vat', value: 'DE123456789' });
    const plain = await get(`/v1/customers/${customer.id}`);
    expect(plain.status).toBe(200);
    expect(plain.body).toMatchObject({ id: customer.id, object: 'customer', name: 'Example GmbH' });
    expect(plain.body).not.toHaveProperty('tax_ids');
    const expanded = await get(`/v1/customers/${customer.id}?expand[]=tax_ids`);
    expect(expanded.body.tax_ids).toMatchObject({
      object: 'list',
      has_more: false,
      url: `/v1/customers/${customer.id}/tax_ids`,
      data: [{ object: 'tax_id', type: 'eu_vat', value: 'DE123456789', customer: customer.id }],
    });
    // Through the SDK (expand[0]=tax_ids), and with the dashboard's restricted key.
    const viaKey = await sdk(localStripeKey('dashboard')).customers.retrieve(customer.id, {
      expand: ['tax_ids'],
    });
    expect(viaKey.deleted ? undefined : viaKey.tax_ids?.data.map((t) => t.value)).toEqual(['DE123456789']);
    // A key without the Customers permission is refused the expansion as the retrieval.
    expect(await get(`/v1/customers/${customer.id}?expand[]=tax_ids`, 'rk_test_invoices_only')).toMatchObject(
      {
        status: 403,
        body: { error: { type: 'permission_error' } },
      },
    );
  });

  it('answers a deleted Customer with its stub, expanded or not; refuses what it cannot expand', async () => {
    const customer = await sdk().customers.create({});
    await sdk().customers.del(customer.id);
    for (const query of ['', '?expand[]=tax_ids'])
      expect((await get(`/v1/customers/${customer.id}${query}`)).body).toEqual({
        id: customer.id,
        object: 'customer',
        deleted: true,
      });
    expect(await get('/v1/customers/cus_never?expand[]=tax_ids')).toMatchObject({
      status: 404,
      body: { error: { code: 'resource_missing', param: 'id' } },
    });
    const live = await sdk().customers.create({});
    expect(await get(`/v1/customers/${live.id}?expand[]=subscriptions`)).toMatchObject({
      status: 400,
      body: { error: { param: 'expand' } },
    });
    expect(await get(`/v1/customers/${live.id}?colour=red`)).toMatchObject({
      status: 400,
      body: { error: { code: 'parameter_unknown', param: 'colour' } },
    });
  });
});

describe('invoices listed by Customer on the stand-in', () => {
  it("lists a deleted Customer's invoices, and refuses an id Stripe never had", async () => {
    const invoicing = stripeInvoicing(sdk());
    const customer = await invoicing.ensureCustomer('acct-listed');
    const id = await invoicing.invoicePayment({
      customer,
      accountId: 'acct-listed',
      paymentIntent: 'pi_listed',
      amountCents: 1_500,
      description: 'API credits',
    });
    await sdk().customers.del(customer);
    expect((await invoicing.listInvoices(customer))?.map((i) => i.id)).toEqual([id]);
    expect(await get('/v1/invoices?customer=cus_never')).toMatchObject({
      status: 400,
      body: { error: { code: 'resource_missing', param: 'customer' } },
    });
    expect(await invoicing.listInvoices('cus_never')).toBeUndefined();
  });
});

describe("invoicing's profile read", () => {
  it('is one call with up to 10 tax IDs, paged past them, in the order Stripe lists them', async () => {
    const invoicing = stripeInvoicing(sdk());
    const customer = await invoicing.ensureCustomer('acct-many-ids');
    await invoicing.saveProfile(customer, 'acct-many-ids', {
      legalName: 'Many IDs SE',
      contacts: ['a@example.com', 'b@example.com'],
      taxIds: [{ type: 'eu_vat', value: 'SE123456789001' }],
      poNumber: 'PO-1',
    });
    const one = await requestsOf(() => invoicing.readProfile(customer));
    expect(one).toEqual([`GET /v1/customers/${customer}?expand[0]=tax_ids`]);

    for (let i = 0; i < 11; i++)
      await sdk().customers.createTaxId(customer, { type: 'eu_vat', value: `DE1000000${10 + i}` });
    const listed = [];
    for await (const taxId of sdk().customers.listTaxIds(customer, { limit: 100 })) listed.push(taxId.value);
    expect(listed).toHaveLength(12);
    let profile: Awaited<ReturnType<typeof invoicing.readProfile>>;
    const two = await requestsOf(async () => {
      profile = await invoicing.readProfile(customer);
    });
    expect(two).toHaveLength(2);
    expect(two[1]).toMatch(new RegExp(`^GET /v1/customers/${customer}/tax_ids\\?.*starting_after=txi_`));
    expect(profile).toMatchObject({
      legalName: 'Many IDs SE',
      contacts: ['a@example.com', 'b@example.com'],
      poNumber: 'PO-1',
    });
    expect(profile?.taxIds.map((t) => t.value)).toEqual(listed);
  });

  it('is undefined for a Customer deleted or never had, in one call', async () => {
    const invoicing = stripeInvoicing(sdk());
    const customer = await invoicing.ensureCustomer('acct-deleted-profile');
    await sdk().customers.del(customer);
    expect(
      await requestsOf(async () => expect(await invoicing.readProfile(customer)).toBeUndefined()),
    ).toHaveLength(1);
    expect(await invoicing.readProfile('cus_never')).toBeUndefined();
  });
});
