/**
 * The Stripe stand-in's delivery as Stripe's live mode does it, on its controllable clock: a failed
 * attempt is retried with exponential backoff for up to 3 days, then never again; an event's
 * `pending_webhooks` and `delivery_success` say where it stands; `GET /v1/events` lists with Stripe's
 * parameters (read through the real SDK) and refuses one it does not know, as Stripe does.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { stripeClient } from '../../../functions/payments/stripe-api.js';
import { type RunningStripeStandIn, startStripeStandIn } from '../../../lib/local/stripe/index.js';
import { RETRY_POLICY, retryWaitMs } from '../../../lib/local/stripe/state.js';

const HOUR = 3600_000;
const DAY = 24 * HOUR;
let standIn: RunningStripeStandIn;
let webhook: Server;
/** What the webhook answers: 500 while the endpoint is "down". */
let answer = 500;
let received: string[] = [];
let sdk: Stripe;

beforeAll(async () => {
  standIn = await startStripeStandIn();
  webhook = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    received.push((JSON.parse(body) as { id: string }).id);
    res.writeHead(answer, { 'content-type': 'application/json' });
    res.end('{}');
  });
  await new Promise<void>((resolve) => webhook.listen(0, '127.0.0.1', resolve));
  standIn.setWebhookUrl(`http://127.0.0.1:${(webhook.address() as AddressInfo).port}/`);
  sdk = stripeClient({ apiKey: standIn.apiKey, apiBase: standIn.url });
});

afterAll(async () => {
  await standIn?.close();
  await new Promise((resolve) => webhook?.close(resolve));
});

beforeEach(() => {
  answer = 500;
  received = [];
});

async function paidSession(cents = 1_000): Promise<string> {
  const session = await sdk.checkout.sessions.create({
    mode: 'payment',
    line_items: [
      { quantity: 1, price_data: { currency: 'usd', unit_amount: cents, product_data: { name: 'c' } } },
    ],
    success_url: 'http://127.0.0.1/ok',
  });
  await standIn.stripe.pay(session.id);
  const event = standIn.stripe.events.at(-1);
  if (!event) throw new Error('no event');
  return event.id;
}

describe("the stand-in's webhook delivery, as Stripe's live mode", () => {
  it('retries a failing endpoint with exponential backoff for 3 days, then never again', async () => {
    const id = await paidSession();
    const created = standIn.stripe.nowMs();
    expect(received).toEqual([id]);
    expect(standIn.stripe.deliveryOf(id)).toMatchObject({ delivered: false, attempts: 1 });
    // Nothing is retried before its wait is over.
    await standIn.stripe.advance(retryWaitMs(1) - 1_000);
    expect(received).toHaveLength(1);
    await standIn.stripe.advance(4 * DAY);
    const attempts = standIn.stripe.deliveries.filter((d) => d.eventId === id);
    expect(attempts.length).toBeGreaterThan(8);
    // Each wait doubles (up to the cap), and the last attempt is within 3 days of the event.
    const waits = attempts.slice(1).map((d, i) => d.at - (attempts[i] as { at: number }).at);
    for (const [i, wait] of waits.entries()) expect(wait).toBeGreaterThanOrEqual(retryWaitMs(i + 1));
    expect(waits.at(-1)).toBe(RETRY_POLICY.maxWaitMs);
    expect((attempts.at(-1)?.at ?? 0) - created).toBeLessThanOrEqual(RETRY_POLICY.giveUpAfterMs + 1_000);
    expect(standIn.stripe.deliveryOf(id)?.nextAt).toBeUndefined();
    // Given up: even with the endpoint back, Stripe never sends it again by itself.
    answer = 200;
    const before = received.length;
    await standIn.stripe.advance(10 * DAY);
    expect(received).toHaveLength(before);
    const event = await sdk.events.retrieve(id);
    expect(event.pending_webhooks).toBe(1);
    // A resend delivers it: pending_webhooks 0, delivery_success true.
    await standIn.stripe.resend(id);
    expect((await sdk.events.retrieve(id)).pending_webhooks).toBe(0);
    const undelivered = await sdk.events.list({ delivery_success: false, limit: 100 });
    expect(undelivered.data.map((e) => e.id)).not.toContain(id);
  });

  it('a retry that succeeds delivers the event and stops the retries', async () => {
    const id = await paidSession();
    answer = 200;
    await standIn.stripe.advance(retryWaitMs(1));
    expect(standIn.stripe.deliveryOf(id)).toMatchObject({ delivered: true, nextAt: undefined });
    await standIn.stripe.advance(DAY);
    expect(received.filter((e) => e === id)).toHaveLength(2);
  });

  it('lists events newest first with type, types, created, delivery_success and pagination; keeps 30 days', async () => {
    answer = 500;
    const failed = [await paidSession(), await paidSession()];
    answer = 200;
    const delivered = await paidSession();
    const since = Math.floor(standIn.stripe.nowMs() / 1000) - 60;
    const list = await sdk.events.list({
      types: ['checkout.session.completed', 'payment_intent.succeeded'],
      delivery_success: false,
      created: { gte: since },
      limit: 1,
    });
    expect(list.object).toBe('list');
    expect(list.url).toBe('/v1/events');
    expect(list.data.map((e) => e.id)).toEqual([failed[1]]);
    expect(list.has_more).toBe(true);
    const next = await sdk.events.list({
      types: ['checkout.session.completed'],
      delivery_success: false,
      created: { gte: since },
      limit: 1,
      starting_after: failed[1] as string,
    });
    expect(next.data.map((e) => e.id)).toEqual([failed[0]]);
    expect(next.data[0]?.pending_webhooks).toBe(1);
    const successes = await sdk.events.list({
      delivery_success: true,
      type: 'checkout.session.*',
      limit: 100,
    });
    expect(successes.data.map((e) => e.id)).toContain(delivered);
    expect(successes.data.map((e) => e.id)).not.toContain(failed[0]);
    // Stripe keeps events 30 days: older ones are neither listed nor retrieved.
    await standIn.stripe.advance(31 * DAY);
    expect((await sdk.events.list({ limit: 100 })).data).toEqual([]);
    await expect(sdk.events.retrieve(delivered)).rejects.toMatchObject({ statusCode: 404 });
  });

  it('refuses an unknown parameter, type with types, and a bad limit as Stripe does', async () => {
    const get = async (query: string) => {
      const response = await fetch(`${standIn.url}/v1/events?${query}`, {
        headers: { authorization: `Bearer ${standIn.apiKey}` },
      });
      return { status: response.status, body: (await response.json()) as { error: Record<string, string> } };
    };
    expect(await get('status=succeeded')).toEqual({
      status: 400,
      body: {
        error: expect.objectContaining({
          type: 'invalid_request_error',
          code: 'parameter_unknown',
          param: 'status',
          message: 'Received unknown parameter: status',
        }),
      },
    });
    expect((await get('created[since]=1')).body.error.param).toBe('created[since]');
    expect((await get('type=a&types[0]=b')).body.error.code).toBe('parameters_exclusive');
    expect((await get('limit=101')).status).toBe(400);
    expect((await get('delivery_success=maybe')).status).toBe(400);
    await expect(
      sdk.events.list({ delivery_success: false, unknown_filter: 1 } as Stripe.EventListParams),
    ).rejects.toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
  });
});
