/**
 * Each function's restricted Stripe key (lib/local/stripe/keys.ts, the permissions docs/deploy.md
 * lists) against the Stripe stand-in, which refuses what a key does not allow as Stripe does (403
 * `permission_error`): each key is enough for its function's own calls, made by the function's code
 * (the dashboard's Checkout, the webhook crediting and taking back, the watch's off-session charge,
 * the reconciler's event list), and each is refused a call that is another function's.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSaveCardCheckout } from '../../../functions/payments/checkout.js';
import { HANDLED_EVENT_TYPES } from '../../../functions/payments/events.js';
import { offSessionPayments, stripeApi, stripeClient } from '../../../functions/payments/stripe-api.js';
import { handleWebhook } from '../../../functions/payments/webhook.js';
import { stripeEvents } from '../../../functions/reconciler/stripe-events.js';
import { type RunningStripeStandIn, startStripeStandIn } from '../../../lib/local/stripe/index.js';
import { localRestrictedKeys, localStripeKey, type StripeKeyHolder } from '../../../lib/local/stripe/keys.js';
import { MemoryStore } from '../../support/memory-store.js';
import { webhookRequest } from './support.js';

const CENT = 10_000_000n;
let standIn: RunningStripeStandIn;
let webhook: Server;
const store = new MemoryStore();
const sdkOf = (holder: StripeKeyHolder) =>
  stripeClient({ apiKey: localStripeKey(holder), apiBase: standIn.url });

beforeAll(async () => {
  standIn = await startStripeStandIn({ restrictedKeys: localRestrictedKeys() });
  await store.createAccount('acct-a', 0n, new Date().toISOString());
  // The webhook as the payments function runs it, with the payments function's key.
  webhook = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const response = await handleWebhook(
      webhookRequest(Buffer.concat(chunks).toString('utf8'), {
        base64: true,
        signature: String(req.headers['stripe-signature'] ?? ''),
      }),
      {
        store,
        stripe: stripeApi(sdkOf('payments')),
        webhookSecret: standIn.webhookSecret,
        now: () => new Date().toISOString(),
      },
    );
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

const balance = async () => (await store.getAccount('acct-a'))?.balanceNano;

/** What Stripe answers a call the key does not allow: 403 `permission_error`, naming the permission. */
async function refused(call: Promise<unknown>, permission: string): Promise<void> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(Stripe.errors.StripePermissionError);
  expect(error).toMatchObject({ statusCode: 403, type: 'StripePermissionError' });
  expect((error as Error).message).toContain(`Having the '${permission}' permission would allow`);
}

describe("each function's restricted Stripe key", () => {
  it("is enough for its own calls: the dashboard's Checkout, the webhook's credit and refund, the watch's charge, the reconciler's events", async () => {
    // The dashboard: a save-card Checkout, read back on the success page.
    const dashboard = stripeApi(sdkOf('dashboard'));
    const session = await createSaveCardCheckout(dashboard, {
      accountId: 'acct-a',
      amountCents: 1_000,
      successUrl: 'http://127.0.0.1/billing?session={CHECKOUT_SESSION_ID}',
      cancelUrl: 'http://127.0.0.1/billing',
    });
    // Paid: the webhook, with its key, reads the PaymentIntent (its card expanded) and credits once.
    await standIn.stripe.pay(session.id);
    expect(await dashboard.retrieveCheckoutSession(session.id)).toMatchObject({ id: session.id });
    expect(await balance()).toBe(1_000n * CENT);
    const intent = String(standIn.stripe.sessions.get(session.id)?.payment_intent);
    // A refund: the webhook lists the charge's refunds and takes back 3.00.
    await standIn.stripe.refund(intent, 300);
    expect(await balance()).toBe(700n * CENT);

    // The balance watch: the off-session charge of the saved card, and reading one back.
    const saved = (await sdkOf('payments').paymentIntents.retrieve(intent, {
      expand: ['payment_method'],
    })) as {
      customer: string;
      payment_method: { id: string };
    };
    const charged = await offSessionPayments(sdkOf('watch')).createOffSession(
      {
        accountId: 'acct-a',
        seq: 1,
        amountCents: 2_000,
        customer: saved.customer,
        paymentMethod: saved.payment_method.id,
      },
      'auto-top-up:acct-a:1',
    );
    expect(charged).toMatchObject({ kind: 'created' });
    const topUp = charged.kind === 'created' ? charged.paymentIntent : '';
    expect((await sdkOf('watch').paymentIntents.retrieve(topUp)).id).toBe(topUp);

    // The reconciler: the events list, and what applying one reads (as the webhook).
    const now = Math.floor(Date.now() / 1000);
    await expect(
      stripeEvents(sdkOf('reconciler')).listUndelivered({
        types: HANDLED_EVENT_TYPES,
        createdGte: now - 3600,
        createdLte: now + 60,
        startingAfter: undefined,
        limit: 100,
      }),
    ).resolves.toMatchObject({ hasMore: false });
    const reconciler = stripeApi(sdkOf('reconciler'));
    await expect(reconciler.retrievePaymentIntent(intent)).resolves.toMatchObject({ id: intent });
    await expect(
      reconciler.listRefunds(String(standIn.stripe.paymentIntents.get(intent)?.latest_charge)),
    ).resolves.toHaveLength(1);
  });

  it("is refused another function's calls, with Stripe's 403 permission_error", async () => {
    const checkoutParams = {
      mode: 'payment' as const,
      line_items: [
        { quantity: 1, price_data: { currency: 'usd', unit_amount: 500, product_data: { name: 'x' } } },
      ],
      success_url: 'http://127.0.0.1/ok',
    };
    await refused(
      stripeApi(sdkOf('watch')).createCheckoutSession(checkoutParams),
      'rak_checkout_session_write',
    );
    await refused(
      stripeApi(sdkOf('reconciler')).createCheckoutSession(checkoutParams),
      'rak_checkout_session_write',
    );
    await refused(stripeApi(sdkOf('dashboard')).retrievePaymentIntent('pi_any'), 'rak_payment_intent_read');
    // The webhook's read expands the card: PaymentIntents write alone (the watch's) is not enough.
    await refused(stripeApi(sdkOf('watch')).retrievePaymentIntent('pi_any'), 'rak_payment_method_read');
    await refused(sdkOf('payments').events.list({ limit: 1 }), 'rak_event_read');
    const charge = {
      amount: 500,
      currency: 'usd',
      customer: 'cus_x',
      payment_method: 'pm_x',
      confirm: true,
      off_session: true,
    };
    await refused(sdkOf('payments').paymentIntents.create(charge), 'rak_payment_intent_write');
    await refused(sdkOf('reconciler').paymentIntents.create(charge), 'rak_payment_intent_write');
    await refused(stripeApi(sdkOf('watch')).listRefunds('ch_any'), 'rak_charge_read');
  });

  it('is refused outright when the stand-in does not know it (401), and the secret key may do anything', async () => {
    const unknown = stripeClient({ apiKey: 'rk_test_local_nobody', apiBase: standIn.url });
    await expect(unknown.events.list({ limit: 1 })).rejects.toBeInstanceOf(
      Stripe.errors.StripeAuthenticationError,
    );
    const full = stripeClient({ apiKey: standIn.apiKey, apiBase: standIn.url });
    await expect(full.events.list({ limit: 1 })).resolves.toMatchObject({ object: 'list' });
  });
});
