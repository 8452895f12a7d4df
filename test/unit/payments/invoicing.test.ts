/**
 * Invoices and the billing profile (functions/payments/invoicing.ts) through the real `stripe` SDK
 * against the Stripe stand-in (lib/local/stripe/invoices.ts, customers.ts): Stripe's shapes and errors
 * for bad parameters, one Customer per account, the profile's round trip, an auto top-up's invoice
 * made once however often it is asked for, Checkout's own invoice, and the PDF it serves.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCheckout } from '../../../functions/payments/checkout.js';
import { stripeInvoicing } from '../../../functions/payments/invoicing.js';
import { stripeApi, stripeClient } from '../../../functions/payments/stripe-api.js';
import { type RunningStripeStandIn, startStripeStandIn } from '../../../lib/local/stripe/index.js';
import { SEARCH_LAG_MS } from '../../../lib/local/stripe/state.js';

let standIn: RunningStripeStandIn;
const sdk = () => stripeClient({ apiKey: standIn.apiKey, apiBase: standIn.url });

beforeAll(async () => {
  standIn = await startStripeStandIn();
});
afterAll(async () => {
  await standIn?.close();
});

const profile = {
  legalName: 'Example GmbH',
  contacts: ['billing@example.com', 'ap@example.com'],
  address: { line1: 'Hauptstr. 1', city: 'Berlin', postalCode: '10115', country: 'DE' },
  taxIds: [{ type: 'eu_vat' as const, value: 'DE123456789' }],
  poNumber: 'PO-4711',
};

describe('the stand-in answers bad billing parameters as Stripe does', () => {
  it('refuses an unknown tax ID type, a malformed value, a bad e-mail and an unknown parameter', async () => {
    const client = sdk();
    const customer = await client.customers.create({ metadata: { accountId: 'acct-x' } });
    const refusal = (promise: Promise<unknown>) =>
      promise.then(
        () => undefined,
        (error: { statusCode?: number; type?: string; code?: string; param?: string }) => ({
          status: error.statusCode,
          type: error.type,
          code: error.code,
          param: error.param,
        }),
      );
    expect(
      await refusal(client.customers.createTaxId(customer.id, { type: 'xx_vat' as 'eu_vat', value: '1' })),
    ).toMatchObject({ status: 400, type: 'StripeInvalidRequestError', param: 'type' });
    expect(
      await refusal(client.customers.createTaxId(customer.id, { type: 'eu_vat', value: 'DE12' })),
    ).toMatchObject({ status: 400, code: 'tax_id_invalid', param: 'value' });
    expect(await refusal(client.customers.update(customer.id, { email: 'not-an-address' }))).toMatchObject({
      status: 400,
      code: 'email_invalid',
      param: 'email',
    });
    expect(
      await refusal(client.invoices.create({ customer: customer.id, colour: 'red' } as never)),
    ).toMatchObject({ status: 400, code: 'parameter_unknown', param: 'colour' });
    expect(await refusal(client.invoices.retrieve('in_missing'))).toMatchObject({
      status: 404,
      code: 'resource_missing',
    });
  });
});

describe('invoicing on the stand-in', () => {
  it('keeps one Customer per account and the profile on it', async () => {
    const invoicing = stripeInvoicing(sdk());
    expect(await invoicing.findCustomer('acct-1')).toBeUndefined();
    const customer = await invoicing.ensureCustomer('acct-1');
    // Search lags (a minute, as Stripe's): the same Customer again through its idempotency key, and
    // found at once only by its id.
    expect(await invoicing.ensureCustomer('acct-1')).toBe(customer);
    expect(await invoicing.findCustomer('acct-1')).toBeUndefined();
    expect(await invoicing.findCustomer('acct-1', ['cus_missing', customer])).toBe(customer);
    await invoicing.saveProfile(customer, 'acct-1', profile);
    expect(await invoicing.readProfile(customer)).toEqual(profile);
    // A change replaces: the tax ID swapped, the PO number and the address gone.
    const changed = {
      contacts: ['billing@example.com'],
      taxIds: [{ type: 'gb_vat' as const, value: 'GB123456789' }],
    };
    await invoicing.saveProfile(customer, 'acct-1', changed);
    expect(await invoicing.readProfile(customer)).toEqual(changed);
    await invoicing.saveProfile(customer, 'acct-1', profile);
  });

  it('finds the Customer made last after two were deleted, knowing none of them, search behind', async () => {
    const invoicing = stripeInvoicing(sdk());
    const first = await invoicing.ensureCustomer('acct-chain');
    await sdk().customers.del(first);
    const second = await invoicing.ensureCustomer('acct-chain', [first]);
    expect(second).not.toBe(first);
    await sdk().customers.del(second);
    const third = await invoicing.ensureCustomer('acct-chain', [second]);
    expect([first, second]).not.toContain(third);
    // Its keys replay the deleted ones (Stripe keeps a key's answer 24 hours): followed to the third.
    expect(await invoicing.findCustomer('acct-chain')).toBeUndefined();
    expect(await invoicing.ensureCustomer('acct-chain')).toBe(third);
  });

  it('invoices an auto top-up once, paid out of band, carrying the profile; the PDF is a PDF', async () => {
    const invoicing = stripeInvoicing(sdk());
    const customer = await invoicing.ensureCustomer('acct-1');
    const payment = {
      customer,
      accountId: 'acct-1',
      paymentIntent: 'pi_auto_1',
      amountCents: 2_000,
      description: 'API credits (auto top-up)',
    };
    const id = await invoicing.invoicePayment(payment);
    expect(await invoicing.invoicePayment(payment)).toBe(id);
    const invoice = await sdk().invoices.retrieve(id);
    expect(invoice).toMatchObject({
      status: 'paid',
      total: 2_000,
      amount_paid: 2_000,
      amount_paid_off_stripe: 2_000,
      amount_remaining: 0,
      customer_name: 'Example GmbH',
      customer_email: 'billing@example.com',
      customer_tax_ids: [{ type: 'eu_vat', value: 'DE123456789' }],
      custom_fields: [{ name: 'PO number', value: 'PO-4711' }],
    });
    expect(invoice.number).toMatch(/^[A-Z0-9]+-0001$/);
    const listed = await invoicing.listInvoices(customer);
    expect(listed?.filter((i) => i.id === id)).toHaveLength(1);
    const pdf = await fetch(String(invoice.invoice_pdf));
    expect(pdf.headers.get('content-type')).toBe('application/pdf');
    const bytes = Buffer.from(await pdf.arrayBuffer()).toString('latin1');
    expect(bytes.startsWith('%PDF-1.4')).toBe(true);
    expect(bytes).toContain('(Example GmbH) Tj');
    expect(bytes).toContain('(PO number: PO-4711) Tj');
    expect(bytes.trimEnd().endsWith('%%EOF')).toBe(true);
  });

  it('makes one invoice when the same auto top-up is invoiced twice at once', async () => {
    const invoicing = stripeInvoicing(sdk());
    const customer = await invoicing.ensureCustomer('acct-1');
    const payment = {
      customer,
      accountId: 'acct-1',
      paymentIntent: 'pi_auto_twice',
      amountCents: 500,
      description: 'API credits (auto top-up)',
    };
    const [a, b] = await Promise.all([invoicing.invoicePayment(payment), invoicing.invoicePayment(payment)]);
    expect(a).toBe(b);
    const made = [...standIn.invoices.invoices.values()].filter(
      (i) => (i.metadata as Record<string, string>).payment_intent === 'pi_auto_twice',
    );
    expect(made).toHaveLength(1);
    expect(made[0]).toMatchObject({ status: 'paid', total: 500 });
  });

  it("has Checkout invoice a purchase for the account's Customer, with the PO number", async () => {
    const stripe = stripeApi(sdk());
    const session = await createCheckout(stripe, {
      accountId: 'acct-1',
      amountCents: 2_500,
      successUrl: 'http://127.0.0.1/ok?session_id={CHECKOUT_SESSION_ID}',
      cancelUrl: 'http://127.0.0.1/cancel',
    });
    const created = await sdk().checkout.sessions.retrieve(session.id);
    // The account's one Customer, which search finds once it has caught up.
    await standIn.stripe.advance(SEARCH_LAG_MS);
    expect(created.customer).toBe(await stripe.invoicing?.findCustomer('acct-1'));
    expect(created.invoice_creation?.enabled).toBe(true);
    expect(created.invoice).toBeNull();
    await standIn.stripe.pay(session.id);
    const paid = await sdk().checkout.sessions.retrieve(session.id);
    const invoice = await sdk().invoices.retrieve(String(paid.invoice));
    expect(invoice).toMatchObject({
      status: 'paid',
      total: 2_500,
      customer_name: 'Example GmbH',
      custom_fields: [{ name: 'PO number', value: 'PO-4711' }],
      metadata: { accountId: 'acct-1' },
    });
  });
});
