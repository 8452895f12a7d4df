/**
 * The payments reconciler end to end, on the local stack (DynamoDB Local behind the IAM layer, each
 * function with its own role; the Stripe stand-in retrying as Stripe's live mode does, on a clock this
 * file moves): the webhook refuses every delivery for 4 simulated days while Checkout purchases, an
 * asynchronous payment that succeeds later, an auto top-up and a refund happen; Stripe gives up on
 * them all; then one reconciler run credits every payment and takes back the refund exactly once
 * (ledger and balances exact) and clears the auto top-up's in-flight mark; when the webhook is back and
 * every event is sent again, nothing moves twice. A backlog larger than a run's pages is worked
 * through over several runs, each carrying on where the last stopped.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { WatchItems } from '../../functions/adapters/dynamodb/watch.js';
import { createCheckout, createSaveCardCheckout } from '../../functions/payments/checkout.js';
import { paymentCounters } from '../../functions/payments/metrics.js';
import { stripeApi, stripeClient } from '../../functions/payments/stripe-api.js';
import type { LocalStack } from '../../lib/local/stack.js';
import type { StripeObjects } from '../../lib/local/stripe/state.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

const CENT = 10_000_000n;
const DAY = 24 * 3600_000;
let target: Target;
let local: LocalStack;
let store: DynamoStore;
let stripe: StripeObjects;
let watches: WatchItems;
let webhookUrl: string;
/** The webhook as a bad deploy leaves it: every delivery answered 503. */
let down: Server;
let downUrl: string;

beforeAll(async () => {
  // The watch's runs driven by the test itself: the stream's delivery off (balance-watch-stream.test.ts has it).
  target = await startTarget({ watchStream: false });
  local = target.local as LocalStack;
  store = target.admin.store as DynamoStore;
  stripe = local.stripe.stripe;
  watches = new WatchItems({ client: store.client, tables: store.tables, wire: store.wire });
  webhookUrl = `${local.emulator.url}/stripe/webhook`;
  down = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(503, { 'content-type': 'text/plain' });
      res.end('Service Unavailable');
    });
  });
  await new Promise<void>((resolve) => down.listen(0, '127.0.0.1', resolve));
  downUrl = `http://127.0.0.1:${(down.address() as AddressInfo).port}/stripe/webhook`;
}, 120_000);

afterAll(async () => {
  await target?.stop();
  await new Promise((resolve) => down?.close(resolve));
});

const api = () => stripeApi(stripeClient({ apiKey: local.stripe.apiKey, apiBase: local.stripe.url }));
const balance = async (accountId: string) => (await store.getAccount(accountId))?.balanceNano;
/** The account's Stripe entries (top-ups and corrections), as `<entryId> <delta>`. */
const stripeEntries = async (accountId: string) =>
  (await store.listLedger(accountId))
    .filter((e) => e.entryId.includes('stripe:'))
    .map((e) => `${e.entryId} ${e.deltaNano}`)
    .sort();

async function purchase(accountId: string, cents: number, method: 'card' | 'async' = 'card') {
  const session = await createCheckout(api(), {
    accountId,
    amountCents: cents,
    successUrl: 'http://127.0.0.1/billing?session={CHECKOUT_SESSION_ID}',
    cancelUrl: 'http://127.0.0.1/billing',
  });
  const paid = await stripe.pay(session.id, method);
  return { session: session.id, paymentIntent: String(paid.payment_intent) };
}

/** Every event of the accounts' payments, by the PaymentIntents and charges they name. */
const eventsOf = (intents: string[]) =>
  stripe.events.filter((sent) => {
    const object = (sent.event.data as { object: Record<string, unknown> }).object;
    return [object.id, object.payment_intent].some((id) => intents.includes(String(id)));
  });

describe('the webhook down for 4 days, then the reconciler', () => {
  it('credits every payment and takes back the refund exactly once; the webhook back and every event resent: nothing twice', async () => {
    // A card saved (webhook up), and auto top-up set for the account C.
    const a = (await newAccount(target, '0')).accountId;
    const b = (await newAccount(target, '0')).accountId;
    const c = (await newAccount(target, '1')).accountId;
    const saveCard = await createSaveCardCheckout(api(), {
      accountId: c,
      amountCents: 2_000,
      successUrl: 'http://127.0.0.1/billing',
      cancelUrl: 'http://127.0.0.1/billing',
    });
    await stripe.pay(saveCard.id);
    await stripe.idle();
    expect(await balance(c)).toBe(2_100n * CENT);
    await watches.setAutoTopUp(
      c,
      { belowCents: 3_000, buyCents: 2_500, enabled: true },
      'dev@example.com',
      new Date().toISOString(),
    );

    // The webhook down: payments go on.
    local.stripe.setWebhookUrl(downUrl);
    const first = await purchase(a, 1_000);
    const second = await purchase(a, 2_500);
    const slow = await purchase(b, 4_000, 'async');
    await stripe.settleAsync(slow.session, 'succeeded');
    await stripe.refund(first.paymentIntent, 400);
    await local.watch();
    const inFlight = (await watches.getWatch(c))?.inFlight;
    expect(inFlight?.paymentIntent).toMatch(/^pi_/);
    const autoTopUp = String(inFlight?.paymentIntent);
    await stripe.idle();
    const intents = [first.paymentIntent, second.paymentIntent, slow.paymentIntent, autoTopUp];
    const missed = eventsOf(intents);
    expect(missed.map((e) => e.type).sort()).toEqual([
      'charge.refunded',
      'checkout.session.async_payment_succeeded',
      'checkout.session.completed',
      'checkout.session.completed',
      'checkout.session.completed',
      'payment_intent.succeeded',
    ]);

    // Stripe retries for 3 days, then gives up: 4 days later none of them was delivered.
    await stripe.advance(4 * DAY);
    for (const sent of missed) {
      const attempts = stripe.deliveries.filter((d) => d.eventId === sent.id);
      expect(attempts.length).toBeGreaterThan(8);
      expect(attempts.every((d) => d.status === 503)).toBe(true);
      expect(stripe.deliveryOf(sent.id)).toMatchObject({ delivered: false, nextAt: undefined });
    }
    expect(await balance(a)).toBe(0n);
    expect(await balance(b)).toBe(0n);
    expect(await balance(c)).toBe(2_100n * CENT);

    // The reconciler: every payment credited once, the refund taken back once, the mark cleared.
    const reconciledBefore = paymentCounters.reconciled;
    const run = await local.reconcile();
    expect(run).toMatchObject({ failures: 0, passComplete: true });
    // Two purchases, the asynchronous one, the auto top-up, the refund (an unpaid completion moves nothing).
    expect(run.applied).toBe(5);
    expect(paymentCounters.reconciled - reconciledBefore).toBe(5);
    const expected = {
      [a]: [
        `topup#stripe:${first.paymentIntent} ${1_000n * CENT}`,
        `topup#stripe:${second.paymentIntent} ${2_500n * CENT}`,
      ].sort(),
      [b]: [`topup#stripe:${slow.paymentIntent} ${4_000n * CENT}`],
      [c]: [`topup#stripe:${autoTopUp} ${2_500n * CENT}`],
    };
    const settled = async () => {
      expect(await balance(a)).toBe(3_100n * CENT);
      expect(await balance(b)).toBe(4_000n * CENT);
      expect(await balance(c)).toBe(4_600n * CENT);
      const aEntries = await stripeEntries(a);
      expect(aEntries.filter((e) => e.startsWith('topup#'))).toEqual(expected[a]);
      const corrections = (await store.listLedger(a)).filter((e) => e.entryId.includes('stripe:refund:'));
      expect(corrections.map((e) => e.deltaNano)).toEqual([-400n * CENT]);
      expect((await stripeEntries(b)).filter((e) => e.startsWith('topup#'))).toEqual(expected[b]);
      expect((await stripeEntries(c)).filter((e) => e.includes(autoTopUp))).toEqual(expected[c]);
    };
    await settled();
    expect((await watches.getWatch(c))?.inFlight).toBeUndefined();

    // Run again: nothing left (its place kept), nothing moved.
    expect(await local.reconcile()).toMatchObject({ applied: 0, failures: 0 });
    await settled();

    // The webhook back: every event sent again (a resend of each, and the same once more) moves nothing.
    local.stripe.setWebhookUrl(webhookUrl);
    for (const sent of [...missed, ...missed]) expect((await stripe.resend(sent.id)).status).toBe(200);
    await stripe.idle();
    await settled();
    for (const sent of missed) expect(stripe.deliveryOf(sent.id)?.delivered).toBe(true);
    // Delivered now: the reconciler no longer sees them.
    expect(await local.reconcile()).toMatchObject({ examined: 0, applied: 0 });
  });

  it('works through a backlog larger than a run, each run carrying on where the last stopped', async () => {
    const accountId = (await newAccount(target, '0')).accountId;
    local.stripe.setWebhookUrl(downUrl);
    const cents = [600, 700, 800, 900, 1_100];
    const paid = [];
    for (const amount of cents) paid.push(await purchase(accountId, amount));
    await stripe.advance(4 * DAY);
    local.stripe.setWebhookUrl(webhookUrl);
    expect(await balance(accountId)).toBe(0n);

    const runs = [];
    for (let i = 0; i < 5; i++) {
      const run = await local.reconcile({ maxPages: 1, pageSize: 2 });
      runs.push(run);
      if (run.passComplete) break;
    }
    // Two events a run: three runs, the first two stopping with more to do.
    expect(runs.map((r) => [r.examined, r.passComplete])).toEqual([
      [2, false],
      [2, false],
      [1, true],
    ]);
    expect(runs.reduce((sum, r) => sum + r.applied, 0)).toBe(5);
    expect(await balance(accountId)).toBe(4_100n * CENT);
    expect((await stripeEntries(accountId)).sort()).toEqual(
      paid.map((p, i) => `topup#stripe:${p.paymentIntent} ${BigInt(cents[i] as number) * CENT}`).sort(),
    );
  });
});
