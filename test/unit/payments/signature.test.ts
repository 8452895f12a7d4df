/**
 * The webhook's signature check (functions/payments/webhook.ts): on the raw bytes as they arrived,
 * base64 decoded where the Function URL encoded them; a forged, tampered, unsigned or stale request is
 * a 400 that writes nothing and calls nothing.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { paymentCounters } from '../../../functions/payments/metrics.js';
import {
  handleWebhook,
  SIGNATURE_TOLERANCE_SECONDS,
  type WebhookDeps,
} from '../../../functions/payments/webhook.js';
import { MemoryStore } from '../../support/memory-store.js';
import { checkoutSession, FakeStripe, stripeEvent, WEBHOOK_SECRET, webhookRequest } from './support.js';

const NOW_MS = Date.parse('2026-05-01T12:00:00.000Z');
const nowSeconds = NOW_MS / 1000;

let store: MemoryStore;
let stripe: FakeStripe;
let deps: WebhookDeps;
let payload: string;

beforeEach(async () => {
  store = new MemoryStore();
  stripe = new FakeStripe();
  deps = {
    store,
    stripe,
    webhookSecret: WEBHOOK_SECRET,
    now: () => new Date(NOW_MS).toISOString(),
    nowMs: () => NOW_MS,
  };
  await store.createAccount('acct-a', 0n, new Date(NOW_MS).toISOString());
  const intent = stripe.intent('acct-a', 1_000);
  // Stripe sends pretty-printed JSON; the signature covers those exact bytes (and a non-ASCII name).
  payload = JSON.stringify(
    stripeEvent('checkout.session.completed', checkoutSession('acct-a', intent, 1_000, { custom: 'Zoë ✓' })),
    null,
    2,
  );
});

const balance = async () => (await store.getAccount('acct-a'))?.balanceNano;

async function refused(request: ReturnType<typeof webhookRequest>) {
  const before = paymentCounters.signatureFailures;
  const response = await handleWebhook(request, deps);
  expect(response.statusCode).toBe(400);
  expect(paymentCounters.signatureFailures).toBe(before + 1);
  expect(await balance()).toBe(0n);
  expect(store.ledger.get('acct-a') ?? []).toEqual([]);
  expect(stripe.calls).toEqual([]);
}

describe('the webhook signature', () => {
  it('accepts a body signed with the endpoint secret and credits', async () => {
    const response = await handleWebhook(webhookRequest(payload, { timestamp: nowSeconds }), deps);
    expect(response.statusCode).toBe(200);
    expect(await balance()).toBe(10_000_000_000n);
  });

  it('verifies a base64-encoded body (as a Function URL may hand it) on its decoded bytes', async () => {
    const response = await handleWebhook(
      webhookRequest(payload, { timestamp: nowSeconds, base64: true }),
      deps,
    );
    expect(response.statusCode).toBe(200);
    expect(await balance()).toBe(10_000_000_000n);
  });

  it('refuses a signature made with another secret (forged)', async () => {
    await refused(webhookRequest(payload, { timestamp: nowSeconds, secret: 'whsec_someone_else' }));
  });

  it('refuses a body changed after signing (the amount raised)', async () => {
    const request = webhookRequest(payload, { timestamp: nowSeconds });
    await refused({ ...request, body: payload.replace('"amount_total": 1000', '"amount_total": 100000') });
  });

  it('refuses a request without a signature, or with a malformed one', async () => {
    await refused(webhookRequest(payload, { signature: null }));
    await refused(webhookRequest(payload, { signature: 't=abc,v1=' }));
  });

  it(`refuses a replay older than the tolerance (${SIGNATURE_TOLERANCE_SECONDS} s), accepts one just inside it`, async () => {
    expect(SIGNATURE_TOLERANCE_SECONDS).toBe(300);
    await refused(webhookRequest(payload, { timestamp: nowSeconds - SIGNATURE_TOLERANCE_SECONDS - 1 }));
    const inside = await handleWebhook(
      webhookRequest(payload, { timestamp: nowSeconds - SIGNATURE_TOLERANCE_SECONDS + 1 }),
      deps,
    );
    expect(inside.statusCode).toBe(200);
  });

  it('during a rotation, accepts a signature made with the previous secret too; once it is removed, refuses it', async () => {
    const previous = 'whsec_test_previous_secret';
    const rotating = { ...deps, webhookSecret: 'whsec_test_new_secret', previousWebhookSecret: previous };
    const old = await handleWebhook(
      webhookRequest(payload, { timestamp: nowSeconds, secret: previous }),
      rotating,
    );
    expect(old.statusCode).toBe(200);
    expect(await balance()).toBe(10_000_000_000n);
    // The new secret's signature is accepted as well (the same event again: credited once).
    const fresh = await handleWebhook(
      webhookRequest(payload, { timestamp: nowSeconds, secret: 'whsec_test_new_secret' }),
      rotating,
    );
    expect(fresh.statusCode).toBe(200);
    expect(await balance()).toBe(10_000_000_000n);
    // Neither secret: refused; a stale signature with the previous secret: refused.
    const before = paymentCounters.signatureFailures;
    const forged = webhookRequest(payload, { timestamp: nowSeconds, secret: 'whsec_someone_else' });
    expect((await handleWebhook(forged, rotating)).statusCode).toBe(400);
    const stale = webhookRequest(payload, {
      timestamp: nowSeconds - SIGNATURE_TOLERANCE_SECONDS - 1,
      secret: previous,
    });
    expect((await handleWebhook(stale, rotating)).statusCode).toBe(400);
    expect(paymentCounters.signatureFailures).toBe(before + 2);
    // The rotation over (the previous secret removed from the Stripe secret): refused.
    const { previousWebhookSecret: _, ...after } = rotating;
    const late = webhookRequest(payload, { timestamp: nowSeconds, secret: previous });
    expect((await handleWebhook(late, after)).statusCode).toBe(400);
  });

  it('answers 405 to anything but POST, writing nothing', async () => {
    const request = webhookRequest(payload, { timestamp: nowSeconds });
    const response = await handleWebhook(
      {
        ...request,
        requestContext: {
          ...request.requestContext,
          http: { ...request.requestContext.http, method: 'GET' },
        },
      },
      deps,
    );
    expect(response.statusCode).toBe(405);
    expect(await balance()).toBe(0n);
  });
});
