/**
 * The Stripe stand-in (lib/local/stripe/) driven by the real `stripe` SDK, its events delivered to the
 * webhook (over HTTP, as a Function URL event) in front of the in-memory store: a checkout paid through
 * the page's Pay button credits once; duplicated, held and reordered events, asynchronous payments,
 * refunds and disputes do what the event table says, whatever the order.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createCheckout, createSaveCardCheckout } from '../../../functions/payments/checkout.js';
import { stripeApi, stripeClient } from '../../../functions/payments/stripe-api.js';
import { handleWebhook } from '../../../functions/payments/webhook.js';
import { type RunningStripeStandIn, startStripeStandIn } from '../../../lib/local/stripe/index.js';
import { MemoryStore } from '../../support/memory-store.js';
import { webhookRequest } from './support.js';

const CENT = 10_000_000n;
let standIn: RunningStripeStandIn;
let webhook: Server;
let store: MemoryStore;
const api = () => stripeApi(stripeClient({ apiKey: standIn.apiKey, apiBase: standIn.url }));

beforeAll(async () => {
  standIn = await startStripeStandIn();
  // The webhook as a Function URL serves it: the raw body, base64 (as for a body it deems binary).
  webhook = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const request = webhookRequest(Buffer.concat(chunks).toString('utf8'), {
      base64: true,
      signature: String(req.headers['stripe-signature'] ?? ''),
    });
    const response = await handleWebhook(request, {
      store,
      stripe: api(),
      webhookSecret: standIn.webhookSecret,
      now: () => new Date().toISOString(),
    });
    res.writeHead(response.statusCode, response.headers);
    res.end(response.body);
  });
  await new Promise<void>((resolve) => webhook.listen(0, '127.0.0.1', resolve));
  standIn.setWebhookUrl(`http://127.0.0.1:${(webhook.address() as AddressInfo).port}/stripe/webhook`);
});

afterAll(async () => {
  await standIn?.close();
  await new Promise((resolve) => webhook?.close(resolve));
});

beforeEach(async () => {
  store = new MemoryStore();
  await store.createAccount('acct-a', 0n, new Date().toISOString());
  await store.createAccount('acct-b', 0n, new Date().toISOString());
});

const createSaveCardCheckoutFor = (accountId: string) =>
  createSaveCardCheckout(api(), {
    accountId,
    amountCents: 1_000,
    successUrl: 'http://127.0.0.1/billing?session={CHECKOUT_SESSION_ID}',
    cancelUrl: 'http://127.0.0.1/billing',
  });
const balance = async (accountId = 'acct-a') => (await store.getAccount(accountId))?.balanceNano;
const checkout = (cents: number, accountId = 'acct-a') =>
  createCheckout(api(), {
    accountId,
    amountCents: cents,
    successUrl: 'http://dashboard.test/billing?session={CHECKOUT_SESSION_ID}',
    cancelUrl: 'http://dashboard.test/billing',
  });
const eventsOf = (type: string) => standIn.stripe.events.filter((e) => e.type === type);

describe('the Stripe stand-in through the real SDK', () => {
  it('serves the checkout page; its Pay button pays, redirects to success_url, and the signed webhook credits once', async () => {
    const session = await checkout(1_000);
    expect(session.url).toBe(`${standIn.url}/checkout/${session.id}`);
    const page = await fetch(session.url);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    const html = await page.text();
    expect(html).toContain('Pay $10.00');
    expect(html).not.toMatch(/<script|style=/i);
    const paid = await fetch(`${standIn.url}/checkout/${session.id}/pay`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'method=card',
      redirect: 'manual',
    });
    expect(paid.status).toBe(303);
    expect(paid.headers.get('location')).toBe(`http://dashboard.test/billing?session=${session.id}`);
    await standIn.stripe.idle();
    expect(standIn.stripe.deliveries.at(-1)).toMatchObject({
      type: 'checkout.session.completed',
      status: 200,
    });
    expect(await balance()).toBe(1_000n * CENT);
    // The session and its PaymentIntent, as Stripe keeps them.
    const stored = standIn.stripe.sessions.get(session.id);
    expect(stored).toMatchObject({
      payment_status: 'paid',
      status: 'complete',
      client_reference_id: 'acct-a',
    });
    const intent = await api().retrievePaymentIntent(String(stored?.payment_intent));
    expect(intent).toMatchObject({
      amount: 1_000,
      currency: 'usd',
      status: 'succeeded',
      metadata: { accountId: 'acct-a' },
    });
  });

  it('the same event sent three times, held and released out of order, credits once', async () => {
    const first = await checkout(1_000);
    const second = await checkout(2_000);
    standIn.stripe.hold();
    await standIn.stripe.pay(first.id);
    await standIn.stripe.pay(second.id);
    const [a, b] = standIn.stripe.heldEvents().map((e) => e.id);
    expect(await balance()).toBe(0n);
    await standIn.stripe.release([String(b), String(a), String(b)]);
    await standIn.stripe.resend(String(a));
    expect(await balance()).toBe(3_000n * CENT);
    expect(store.ledger.get('acct-a')?.filter((e) => e.type === 'topup')).toHaveLength(2);
  });

  it('an asynchronous payment: completed unpaid credits nothing, then async_payment_succeeded credits once', async () => {
    const session = await checkout(5_000);
    await standIn.stripe.pay(session.id, 'async');
    expect(eventsOf('checkout.session.completed').at(-1)?.event).toMatchObject({
      data: { object: { id: session.id, payment_status: 'unpaid' } },
    });
    expect(await balance()).toBe(0n);
    await standIn.stripe.settleAsync(session.id, 'succeeded');
    const succeeded = eventsOf('checkout.session.async_payment_succeeded').at(-1);
    await standIn.stripe.resend(String(succeeded?.id));
    expect(await balance()).toBe(5_000n * CENT);
  });

  it('an asynchronous payment that fails credits nothing', async () => {
    const session = await checkout(5_000);
    await standIn.stripe.pay(session.id, 'async');
    await standIn.stripe.settleAsync(session.id, 'failed');
    expect(standIn.stripe.deliveries.at(-1)).toMatchObject({
      type: 'checkout.session.async_payment_failed',
      status: 200,
    });
    expect(await balance()).toBe(0n);
  });

  it('refunds in parts, their events reordered and duplicated: exactly the refunded total is taken back', async () => {
    const session = await checkout(1_000);
    await standIn.stripe.pay(session.id);
    const intent = String(standIn.stripe.sessions.get(session.id)?.payment_intent);
    standIn.stripe.hold();
    await standIn.stripe.refund(intent, 300);
    await standIn.stripe.refund(intent, 200);
    await standIn.stripe.refund(intent); // the rest: 500
    const held = standIn.stripe.heldEvents();
    expect(
      held.map((e) => (e.event.data as { object: { amount_refunded: number } }).object.amount_refunded),
    ).toEqual([300, 500, 1_000]);
    await standIn.stripe.release('reverse');
    for (const event of held) await standIn.stripe.resend(event.id);
    expect(await balance()).toBe(0n);
    // Stripe refuses a refund beyond what is left on the charge.
    await expect(standIn.stripe.refund(intent, 1)).rejects.toThrow(/greater than unrefunded amount/);
  });

  it("a refund larger than the balance left takes it below zero; a refund of another account's payment touches only that account", async () => {
    const ofA = await checkout(1_000);
    const ofB = await checkout(1_000, 'acct-b');
    await standIn.stripe.pay(ofA.id);
    await standIn.stripe.pay(ofB.id);
    await store.removeCredits('acct-a', 'spent', 900n * CENT, new Date().toISOString());
    await standIn.stripe.refund(String(standIn.stripe.sessions.get(ofA.id)?.payment_intent));
    expect(await balance('acct-a')).toBe(-900n * CENT);
    expect(await balance('acct-b')).toBe(1_000n * CENT);
  });

  it('a dispute takes the amount back once and suspends the account', async () => {
    const session = await checkout(2_000);
    await standIn.stripe.pay(session.id);
    const dispute = await standIn.stripe.dispute(
      String(standIn.stripe.sessions.get(session.id)?.payment_intent),
    );
    const event = eventsOf('charge.dispute.created').at(-1);
    await standIn.stripe.resend(String(event?.id));
    expect(dispute).toMatchObject({ object: 'dispute', amount: 2_000 });
    expect(await store.getAccount('acct-a')).toMatchObject({ status: 'suspended', balanceNano: 0n });
  });

  it("answers errors in Stripe's shape, which the SDK raises as its typed errors", async () => {
    await expect(api().retrievePaymentIntent('pi_missing')).rejects.toMatchObject({
      type: 'StripeInvalidRequestError',
      statusCode: 404,
      code: 'resource_missing',
    });
    const wrongKey = stripeApi(stripeClient({ apiKey: 'sk_test_wrong', apiBase: standIn.url }));
    await expect(wrongKey.retrievePaymentIntent('pi_x')).rejects.toMatchObject({ statusCode: 401 });
  });

  it('refuses an off-session PaymentIntent on a deleted customer or a detached card as Stripe does (400, {error: {type, code, message, param}})', async () => {
    const objects = standIn.stripe;
    const { id: session } = await createSaveCardCheckoutFor('acct-a');
    await objects.pay(session);
    await objects.idle();
    const intent = objects.paymentIntents.get(String(objects.sessions.get(session)?.payment_intent));
    const customer = String(intent?.customer);
    const method = String(intent?.payment_method);
    const offSession = (key: string) =>
      fetch(`${standIn.url}/v1/payment_intents`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${standIn.apiKey}`,
          'content-type': 'application/x-www-form-urlencoded',
          'idempotency-key': key,
        },
        body: new URLSearchParams({
          amount: '2000',
          currency: 'usd',
          customer,
          payment_method: method,
          confirm: 'true',
          off_session: 'true',
        }),
      });
    const sdk = stripeClient({ apiKey: standIn.apiKey, apiBase: standIn.url });
    expect(await sdk.paymentMethods.detach(method)).toMatchObject({ id: method, customer: null });
    const detached = await offSession('k-detached');
    expect(detached.status).toBe(400);
    expect(((await detached.json()) as { error: unknown }).error).toMatchObject({
      type: 'invalid_request_error',
      param: 'payment_method',
      message: expect.stringContaining('was detached from a Customer'),
    });
    expect(await sdk.customers.del(customer)).toMatchObject({ id: customer, deleted: true });
    const deleted = await offSession('k-deleted');
    expect(deleted.status).toBe(400);
    expect(await deleted.json()).toEqual({
      error: {
        type: 'invalid_request_error',
        code: 'resource_missing',
        param: 'customer',
        message: `No such customer: '${customer}'`,
      },
    });
  });

  it("two save-card Checkouts on one account make one Customer: the second names the first's; a deleted one is replaced", async () => {
    const objects = standIn.stripe;
    const saveCard = async (customer?: string) => {
      const { id } = await createSaveCardCheckout(api(), {
        accountId: 'acct-a',
        amountCents: 1_000,
        successUrl: 'http://127.0.0.1/billing?session={CHECKOUT_SESSION_ID}',
        cancelUrl: 'http://127.0.0.1/billing',
        customer,
      });
      await objects.pay(id);
      await objects.idle();
      const session = objects.sessions.get(id);
      const intent = objects.paymentIntents.get(String(session?.payment_intent));
      return { session, intent, card: objects.paymentMethods.get(String(intent?.payment_method)) };
    };
    const customersBefore = objects.customers.size;
    // The account's Customer is made before its first session (the invoices carry its profile).
    const first = await saveCard();
    expect(first.session).toMatchObject({ customer_creation: null });
    expect(objects.customers.get(String(first.session?.customer))?.metadata).toEqual({ accountId: 'acct-a' });
    const customer = String(first.session?.customer);
    expect(customer).toMatch(/^cus_/);
    const second = await saveCard(customer);
    expect(second.session).toMatchObject({ customer, customer_creation: null });
    expect(second.intent?.customer).toBe(customer);
    expect(second.card).toMatchObject({ customer });
    expect(second.card?.id).not.toBe(first.card?.id);
    expect(objects.customers.size).toBe(customersBefore + 1);

    // Stripe refuses both at once, and a customer it does not know.
    const sdk = stripeClient({ apiKey: standIn.apiKey, apiBase: standIn.url });
    const params = {
      mode: 'payment' as const,
      line_items: [
        { quantity: 1, price_data: { currency: 'usd', unit_amount: 1_000, product_data: { name: 'x' } } },
      ],
      success_url: 'http://127.0.0.1/billing',
    };
    await expect(
      sdk.checkout.sessions.create({ ...params, customer, customer_creation: 'always' }),
    ).rejects.toMatchObject({ statusCode: 400, param: 'customer_creation' });
    await sdk.customers.del(customer);
    await expect(sdk.checkout.sessions.create({ ...params, customer })).rejects.toMatchObject({
      statusCode: 400,
      code: 'resource_missing',
      param: 'customer',
    });
    // The account's Customer deleted in Stripe's dashboard: the next save makes a new one.
    const third = await saveCard(customer);
    expect(third.session).toMatchObject({ customer_creation: null });
    expect(third.session?.customer).not.toBe(customer);
    expect(third.card?.customer).toBe(third.session?.customer);
  });

  it('the test controls over HTTP: delay, hold, release', async () => {
    const control = (action: string, body: unknown = {}) =>
      fetch(`${standIn.url}/_stand-in/${action}`, { method: 'POST', body: JSON.stringify(body) }).then((r) =>
        r.json(),
      );
    expect(await control('delay', { ms: 50 })).toEqual({ delayMs: 50 });
    await control('hold');
    const session = await checkout(600);
    await standIn.stripe.pay(session.id);
    expect(await balance()).toBe(0n);
    const started = Date.now();
    await control('release', { order: 'reverse' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    await control('delay', { ms: 0 });
    expect(await balance()).toBe(600n * CENT);
  });
});
