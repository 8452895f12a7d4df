/**
 * Buying credits end to end, on the local stack as deployed: the Checkout Session created through the
 * real `stripe` SDK against the Stripe stand-in (lib/local/stripe/), paid with the checkout page's Pay
 * button, and its signed events delivered through the emulated distribution's `/stripe/webhook` (no
 * API key check on that behaviour) to the payments function, which acts with its own role's
 * credentials: the local IAM layer refuses (and fails this file for) any call its synthesized policy
 * does not allow. The balance rises by exactly the amount once, whatever the stand-in sends twice or
 * out of order; refunds and a dispute take back exactly what Stripe says; a bad signature writes nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { createCheckout } from '../../functions/payments/checkout.js';
import { stripeApi, stripeClient } from '../../functions/payments/stripe-api.js';
import type { RunningStripeStandIn } from '../../lib/local/stripe/index.js';
import { landTransfers, newAccount as newApiAccount, startTarget, type Target } from '../support/target.js';

const CENT = 10_000_000n;
let target: Target;
let store: DynamoStore;
let standIn: RunningStripeStandIn;
let origin: string;

beforeAll(async () => {
  target = await startTarget();
  store = target.admin.store as DynamoStore;
  standIn = target.local?.stripe as RunningStripeStandIn;
  origin = new URL(target.baseUrl).origin;
}, 120_000);

afterAll(async () => {
  await target?.stop();
});

const api = () => stripeApi(stripeClient({ apiKey: standIn.apiKey, apiBase: standIn.url }));
const balance = async (accountId: string) => (await store.getAccount(accountId))?.balanceNano;
async function newAccount(): Promise<string> {
  return (await newApiAccount(target, '0')).accountId;
}
const checkout = (accountId: string, cents: number) =>
  createCheckout(api(), {
    accountId,
    amountCents: cents,
    successUrl: 'http://127.0.0.1/billing?session={CHECKOUT_SESSION_ID}',
    cancelUrl: 'http://127.0.0.1/billing',
  });
/** The Pay button of the stand-in's checkout page, as a browser submits it. */
async function clickPay(url: string) {
  const html = await (await fetch(url)).text();
  const action = /<form method="post" action="([^"]+)"><input type="hidden" name="method" value="card">/.exec(
    html,
  )?.[1];
  const response = await fetch(new URL(String(action), url), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'method=card',
    redirect: 'manual',
  });
  await standIn.stripe.idle();
  return response;
}
const intentOf = (sessionId: string) => String(standIn.stripe.sessions.get(sessionId)?.payment_intent);

describe('payments webhook end to end (stand-in, local stack, DynamoDB Local)', () => {
  it('buying $10 raises the balance by exactly $10 once, though the event is sent three times and out of order', async () => {
    const accountId = await newAccount();
    const session = await checkout(accountId, 1_000);
    const paid = await clickPay(session.url);
    expect(paid.status).toBe(303);
    expect(standIn.stripe.deliveries.at(-1)).toMatchObject({
      type: 'checkout.session.completed',
      status: 200,
    });
    expect(await balance(accountId)).toBe(1_000n * CENT);
    const [completed] = standIn.stripe.events
      .filter((e) => e.type === 'checkout.session.completed')
      .slice(-1);
    // Two more purchases held, then everything released in reverse, the first event again in between.
    const second = await checkout(accountId, 2_500);
    standIn.stripe.hold();
    await standIn.stripe.pay(second.id);
    await standIn.stripe.resend(String(completed?.id));
    await standIn.stripe.release('reverse');
    await standIn.stripe.resend(String(completed?.id));
    expect(await balance(accountId)).toBe(3_500n * CENT);
    const ledger = await store.listLedger(accountId);
    expect(ledger.filter((e) => e.type === 'topup').map((e) => [e.entryId, e.deltaNano])).toEqual(
      expect.arrayContaining([
        [`topup#stripe:${intentOf(session.id)}`, 1_000n * CENT],
        [`topup#stripe:${intentOf(second.id)}`, 2_500n * CENT],
      ]),
    );
    expect(ledger).toHaveLength(2);
  });

  it('refunds in parts, delivered in reverse and twice, take back exactly the refunded total', async () => {
    const accountId = await newAccount();
    const session = await checkout(accountId, 1_000);
    await clickPay(session.url);
    standIn.stripe.hold();
    await standIn.stripe.refund(intentOf(session.id), 400);
    await standIn.stripe.refund(intentOf(session.id), 350);
    const held = standIn.stripe.heldEvents().map((e) => e.id);
    await standIn.stripe.release([...held].reverse().concat(held));
    expect(await balance(accountId)).toBe(250n * CENT);
    const corrections = (await store.listLedger(accountId)).filter((e) => e.type === 'correction');
    expect(corrections.map((e) => e.deltaNano).sort()).toEqual([-400n * CENT, -350n * CENT].sort());
  });

  it('a dispute takes the payment back (below zero if spent) and suspends the account', async () => {
    const accountId = await newAccount();
    const session = await checkout(accountId, 2_000);
    await clickPay(session.url);
    await store.removeCredits(accountId, 'spent', 1_500n * CENT, new Date().toISOString());
    await standIn.stripe.dispute(intentOf(session.id));
    expect(await store.getAccount(accountId)).toMatchObject({
      status: 'suspended',
      balanceNano: -1_500n * CENT,
    });
  });

  it('a forged signature is a 400 and writes nothing; an unknown account is a 200 and writes nothing', async () => {
    const accountId = await newAccount();
    const forged = await fetch(`${origin}/stripe/webhook`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'stripe-signature': `t=${Math.floor(Date.now() / 1000)},v1=00`,
      },
      body: JSON.stringify({ id: 'evt_forged', type: 'checkout.session.completed', data: { object: {} } }),
    });
    expect(forged.status).toBe(400);
    const session = await checkout('acct-that-does-not-exist', 1_000);
    await clickPay(session.url);
    expect(standIn.stripe.deliveries.at(-1)).toMatchObject({ status: 200 });
    expect(await store.getAccount('acct-that-does-not-exist')).toBeUndefined();
    expect(await store.listLedger(accountId)).toEqual([]);
  });

  it('credits a split account: the payment on slice 0, its share of the other slices on its way to them', async () => {
    const accountId = await newAccount();
    expect(await store.splitAccount(accountId, 4)).toBe(4);
    const session = await checkout(accountId, 1_000);
    await clickPay(session.url);
    expect(await balance(accountId)).toBe(1_000n * CENT);
    // The payments function scheduled the spread (with its role's grants); the sweeper moves it.
    expect((await store.listTransfers(accountId)).map((t) => t.amountNano)).toEqual(
      Array(3).fill(250n * CENT),
    );
    await landTransfers(target);
    expect(await balance(accountId)).toBe(1_000n * CENT);
    expect(await store.listTransfers(accountId)).toEqual([]);
    // A refund larger than slice 0 holds is taken from the slices that have it, in one transaction.
    await standIn.stripe.refund(intentOf(session.id), 400);
    expect(await balance(accountId)).toBe(600n * CENT);
  });

  it("answers the webhook without an API key (the edge key check is the API's) and keeps the API behind it", async () => {
    const keyless = await fetch(`${origin}/stripe/webhook`, { method: 'POST', body: '{}' });
    expect(keyless.status).toBe(400);
    const api = await fetch(`${target.baseUrl}/models`);
    expect(api.status).toBe(401);
  });
});
