/**
 * The webhook's table of events (functions/payments/events.ts), event by event, against the in-memory
 * store: what each credits or takes back, that a duplicated or reordered event moves money once, and
 * that an event of an unknown account, another currency or another account's session writes nothing.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { correctionEntryId, topUpEntryId } from '../../../functions/core/store.js';
import { paymentCounters } from '../../../functions/payments/metrics.js';
import { handleWebhook, type WebhookDeps } from '../../../functions/payments/webhook.js';
import { MemoryStore } from '../../support/memory-store.js';
import {
  charge,
  checkoutSession,
  dispute,
  FakeStripe,
  stripeEvent,
  WEBHOOK_SECRET,
  webhookRequest,
} from './support.js';

const NOW = '2026-05-01T12:00:00.000Z';
/** One US cent in nano-USD. */
const CENT = 10_000_000n;

let store: MemoryStore;
let stripe: FakeStripe;
let deps: WebhookDeps;

beforeEach(async () => {
  store = new MemoryStore();
  stripe = new FakeStripe();
  deps = { store, stripe, webhookSecret: WEBHOOK_SECRET, now: () => NOW };
  await store.createAccount('acct-a', 0n, NOW);
  await store.createAccount('acct-b', 0n, NOW);
});

const post = async (event: ReturnType<typeof stripeEvent>) => {
  const response = await handleWebhook(webhookRequest(JSON.stringify(event)), deps);
  return { status: response.statusCode, body: JSON.parse(String(response.body)) as { outcome?: string } };
};
const balance = async (accountId: string) => (await store.getAccount(accountId))?.balanceNano;
const ledger = (accountId: string) => store.ledger.get(accountId) ?? [];
const counters = () => ({ ...paymentCounters });

/** A paid session of `cents` for `accountId`, its PaymentIntent, and the completed event. */
function paidSession(accountId: string, cents: number) {
  const intent = stripe.intent(accountId, cents);
  const session = checkoutSession(accountId, intent, cents);
  return { intent, session, completed: stripeEvent('checkout.session.completed', session) };
}

describe('checkout.session.completed', () => {
  it('paid: credits amount_total once, as a top-up referenced by the PaymentIntent id', async () => {
    const { intent, completed } = paidSession('acct-a', 1_000);
    expect(await post(completed)).toEqual({ status: 200, body: { received: true, outcome: 'credited' } });
    expect(await balance('acct-a')).toBe(1_000n * CENT);
    expect(ledger('acct-a')).toEqual([
      {
        entryId: topUpEntryId(`stripe:${intent}`),
        type: 'topup',
        createdAt: NOW,
        deltaNano: 10_000_000_000n,
        reference: `stripe:${intent}`,
      },
    ]);
    // Stripe's retry of the same event, and a second event for the same payment: no-ops.
    expect((await post(completed)).body.outcome).toBe('already-credited');
    expect((await post({ ...completed, id: 'evt_other' })).body.outcome).toBe('already-credited');
    expect(await balance('acct-a')).toBe(1_000n * CENT);
    expect(await balance('acct-b')).toBe(0n);
    // One audit entry, written with the credit (the retries wrote none): by Stripe, no secret.
    expect(store.audit.get('acct-a')).toEqual([
      expect.objectContaining({
        actor: { kind: 'stripe' },
        action: 'purchase',
        at: NOW,
        target: intent,
        details: { amount: '$10.00' },
      }),
    ]);
  });

  it('converts cents to nano-USD exactly, odd amounts included', async () => {
    const { completed } = paidSession('acct-a', 123_457);
    await post(completed);
    expect(await balance('acct-a')).toBe(1_234_570_000_000n);
  });

  it('unpaid (an asynchronous method): credits nothing yet', async () => {
    const intent = stripe.intent('acct-a', 2_500);
    const session = checkoutSession('acct-a', intent, 2_500, { payment_status: 'unpaid' });
    expect((await post(stripeEvent('checkout.session.completed', session))).body.outcome).toBe(
      'awaiting-payment',
    );
    expect(await balance('acct-a')).toBe(0n);
    expect(ledger('acct-a')).toEqual([]);
  });
});

describe('checkout.session.async_payment_succeeded and _failed', () => {
  it('succeeded after completed-unpaid credits once; a repeat, or a paid completed event, does not again', async () => {
    const intent = stripe.intent('acct-a', 2_500);
    const unpaid = checkoutSession('acct-a', intent, 2_500, { payment_status: 'unpaid' });
    const paid = { ...unpaid, payment_status: 'paid' };
    const succeeded = stripeEvent('checkout.session.async_payment_succeeded', paid);
    await post(stripeEvent('checkout.session.completed', unpaid));
    expect((await post(succeeded)).body.outcome).toBe('credited');
    expect((await post(succeeded)).body.outcome).toBe('already-credited');
    expect((await post(stripeEvent('checkout.session.completed', paid))).body.outcome).toBe(
      'already-credited',
    );
    expect(await balance('acct-a')).toBe(2_500n * CENT);
    expect(ledger('acct-a')).toHaveLength(1);
  });

  it('succeeded before completed (out of order): credits once', async () => {
    const intent = stripe.intent('acct-a', 700);
    const paid = checkoutSession('acct-a', intent, 700);
    expect((await post(stripeEvent('checkout.session.async_payment_succeeded', paid))).body.outcome).toBe(
      'credited',
    );
    expect((await post(stripeEvent('checkout.session.completed', paid))).body.outcome).toBe(
      'already-credited',
    );
    expect(await balance('acct-a')).toBe(700n * CENT);
  });

  it('failed: credits nothing', async () => {
    const intent = stripe.intent('acct-a', 2_500);
    const session = checkoutSession('acct-a', intent, 2_500, { payment_status: 'unpaid' });
    await post(stripeEvent('checkout.session.completed', session));
    expect((await post(stripeEvent('checkout.session.async_payment_failed', session))).body.outcome).toBe(
      'payment-failed',
    );
    expect(await balance('acct-a')).toBe(0n);
    expect(ledger('acct-a')).toEqual([]);
  });
});

describe('charge.refunded', () => {
  it('takes back each refund once by refund id, whatever the order or duplication of the events', async () => {
    const { intent, completed } = paidSession('acct-a', 1_000);
    await post(completed);
    const ch = charge(intent, 1_000);
    const first = stripe.refund(ch.id, 300);
    const afterFirst = stripeEvent('charge.refunded', { ...ch, amount_refunded: 300 });
    const second = stripe.refund(ch.id, 200);
    const afterSecond = stripeEvent('charge.refunded', { ...ch, amount_refunded: 500 });
    // The later event first: both refunds are listed by then, both taken back.
    expect((await post(afterSecond)).status).toBe(200);
    expect(await balance('acct-a')).toBe(500n * CENT);
    // The earlier event late, and each event again: nothing more.
    await post(afterFirst);
    await post(afterSecond);
    await post(afterFirst);
    expect(await balance('acct-a')).toBe(500n * CENT);
    expect(
      ledger('acct-a')
        .filter((e) => e.type === 'correction')
        .map((e) => [e.entryId, e.deltaNano]),
    ).toEqual([
      [correctionEntryId(`stripe:refund:${second}`), -200n * CENT],
      [correctionEntryId(`stripe:refund:${first}`), -300n * CENT],
    ]);
    const refunds = store.audit.get('acct-a')?.filter((e) => e.action === 'refund');
    expect(refunds?.map((e) => [e.target, e.details?.amount, e.actor.kind])).toEqual([
      [second, '$2.00', 'stripe'],
      [first, '$3.00', 'stripe'],
    ]);
  });

  it('in order, partial then the rest: the total taken back is the final amount_refunded', async () => {
    const { intent, completed } = paidSession('acct-a', 1_000);
    await post(completed);
    const ch = charge(intent, 1_000);
    stripe.refund(ch.id, 250);
    await post(stripeEvent('charge.refunded', { ...ch, amount_refunded: 250 }));
    expect(await balance('acct-a')).toBe(750n * CENT);
    stripe.refund(ch.id, 750);
    await post(stripeEvent('charge.refunded', { ...ch, amount_refunded: 1_000, refunded: true }));
    expect(await balance('acct-a')).toBe(0n);
  });

  it('a refund larger than what remains of the balance takes back all of it: the balance goes below zero', async () => {
    const { intent, completed } = paidSession('acct-a', 1_000);
    await post(completed);
    // $8 of the $10 spent.
    await store.settleCharge({
      accountId: 'acct-a',
      generationId: 'gen-1',
      keyId: 'k',
      tier: 'svc-fast',
      upstreamModel: 'm',
      promptTokens: 1,
      completionTokens: 1,
      cachedTokens: 0,
      upstreamCostUsd: '6',
      billedNano: 800n * CENT,
      estimated: false,
      createdAt: NOW,
    });
    const ch = charge(intent, 1_000, 1_000);
    stripe.refund(ch.id, 1_000);
    const refunded = stripeEvent('charge.refunded', ch);
    await post(refunded);
    await post(refunded);
    expect(await balance('acct-a')).toBe(-800n * CENT);
  });

  it('a failed or canceled refund takes nothing back', async () => {
    const { intent, completed } = paidSession('acct-a', 1_000);
    await post(completed);
    const ch = charge(intent, 1_000);
    stripe.refund(ch.id, 400, 'failed');
    stripe.refund(ch.id, 100, 'canceled');
    await post(stripeEvent('charge.refunded', ch));
    expect(await balance('acct-a')).toBe(1_000n * CENT);
  });

  it('refunds Stripe does not list yet: a 500, so Stripe sends the event again; what is listed is taken back once', async () => {
    const { intent, completed } = paidSession('acct-a', 1_000);
    await post(completed);
    const ch = charge(intent, 1_000);
    stripe.refund(ch.id, 100);
    const before = counters();
    const early = stripeEvent('charge.refunded', { ...ch, amount_refunded: 600 });
    expect((await post(early)).status).toBe(500);
    expect(paymentCounters.failures).toBe(before.failures + 1);
    expect(await balance('acct-a')).toBe(900n * CENT);
    stripe.refund(ch.id, 500);
    expect((await post(early)).status).toBe(200);
    expect(await balance('acct-a')).toBe(400n * CENT);
  });

  it('a refund before its payment is credited (out of order): the two still net to the right balance', async () => {
    const { intent, completed } = paidSession('acct-a', 1_000);
    const ch = charge(intent, 1_000, 400);
    stripe.refund(ch.id, 400);
    await post(stripeEvent('charge.refunded', ch));
    expect(await balance('acct-a')).toBe(-400n * CENT);
    await post(completed);
    expect(await balance('acct-a')).toBe(600n * CENT);
  });
});

describe('charge.dispute.created', () => {
  it('takes the disputed amount back once and suspends the account', async () => {
    const { intent, completed } = paidSession('acct-a', 2_000);
    await post(completed);
    const ch = charge(intent, 2_000);
    const dp = dispute(ch.id, intent, 2_000);
    const created = stripeEvent('charge.dispute.created', dp);
    const before = counters();
    expect((await post(created)).body.outcome).toBe('disputed');
    expect(await post(created)).toMatchObject({ status: 200 });
    const account = await store.getAccount('acct-a');
    expect(account?.status).toBe('suspended');
    expect(account?.balanceNano).toBe(0n);
    expect(ledger('acct-a').map((e) => e.entryId)).toContain(correctionEntryId(`stripe:dispute:${dp.id}`));
    expect(store.audit.get('acct-a')?.filter((e) => e.action === 'dispute')).toEqual([
      expect.objectContaining({ actor: { kind: 'stripe' }, target: dp.id, details: { amount: '$20.00' } }),
    ]);
    expect(paymentCounters.disputes).toBe(before.disputes + 1);
    expect((await store.getAccount('acct-b'))?.status).toBe('active');
  });

  it('leaves a banned account banned: a dispute suspends, it never lifts a ban', async () => {
    const { intent, completed } = paidSession('acct-a', 2_000);
    await post(completed);
    await store.setAccountStatus('acct-a', 'banned');
    const created = stripeEvent('charge.dispute.created', dispute(charge(intent, 2_000).id, intent, 2_000));
    expect((await post(created)).body.outcome).toBe('disputed');
    expect(await store.getAccount('acct-a')).toMatchObject({ status: 'banned', balanceNano: 0n });
  });
});

describe('charge.dispute.created, delivered again', () => {
  it("does not suspend again an account the operator reinstated after the dispute: Stripe's retry of the same event is not a new dispute", async () => {
    const { intent, completed } = paidSession('acct-a', 2_000);
    await post(completed);
    const created = stripeEvent('charge.dispute.created', dispute(charge(intent, 2_000).id, intent, 2_000));
    await post(created);
    expect((await store.getAccount('acct-a'))?.status).toBe('suspended');
    await store.setAccountStatus('acct-a', 'active');
    expect((await post(created)).body.outcome).toBe('disputed');
    expect((await store.getAccount('acct-a'))?.status).toBe('active');
  });

  it('suspends on the retry when the first delivery failed between taking the credit back and suspending', async () => {
    const { intent, completed } = paidSession('acct-a', 2_000);
    await post(completed);
    const dp = dispute(charge(intent, 2_000).id, intent, 2_000);
    await store.removeCredits('acct-a', `stripe:dispute:${dp.id}`, 2_000n * CENT, new Date().toISOString(), {
      force: true,
    });
    expect((await store.getAccount('acct-a'))?.status).toBe('active');
    await post(stripeEvent('charge.dispute.created', dp));
    expect(await store.getAccount('acct-a')).toMatchObject({ status: 'suspended', balanceNano: 0n });
  });

  it('a second, different dispute suspends again after a reinstatement', async () => {
    const { intent, completed } = paidSession('acct-a', 2_000);
    await post(completed);
    const ch = charge(intent, 2_000);
    await post(stripeEvent('charge.dispute.created', dispute(ch.id, intent, 500)));
    await store.setAccountStatus('acct-a', 'active');
    await post(stripeEvent('charge.dispute.created', dispute(ch.id, intent, 700)));
    expect((await store.getAccount('acct-a'))?.status).toBe('suspended');
  });
});

describe('events that write nothing', () => {
  it('an account the store does not have: 200, counted for the alarm, nothing written', async () => {
    const { completed } = paidSession('acct-gone', 1_000);
    const before = counters();
    expect(await post(completed)).toEqual({ status: 200, body: { received: true, outcome: 'not-credited' } });
    expect(paymentCounters.unknownAccounts).toBe(before.unknownAccounts + 1);
    expect(await store.getAccount('acct-gone')).toBeUndefined();
    expect(ledger('acct-a')).toEqual([]);
  });

  it("a session naming one account whose PaymentIntent names another (another account's payment): nothing credited", async () => {
    const intentOfA = stripe.intent('acct-a', 1_000);
    const before = counters();
    const claimed = checkoutSession('acct-b', intentOfA, 1_000);
    expect((await post(stripeEvent('checkout.session.completed', claimed))).body.outcome).toBe(
      'not-credited',
    );
    expect(paymentCounters.unknownAccounts).toBe(before.unknownAccounts + 1);
    expect(await balance('acct-a')).toBe(0n);
    expect(await balance('acct-b')).toBe(0n);
    // B's own payment credits B, and only B.
    const { completed } = paidSession('acct-b', 500);
    await post(completed);
    expect(await balance('acct-b')).toBe(500n * CENT);
    expect(await balance('acct-a')).toBe(0n);
  });

  it("a session without client_reference_id, or an amount that is not its PaymentIntent's: nothing credited", async () => {
    const intent = stripe.intent('acct-a', 1_000);
    await post(stripeEvent('checkout.session.completed', checkoutSession(null, intent, 1_000)));
    await post(stripeEvent('checkout.session.completed', checkoutSession('acct-a', intent, 9_999)));
    expect(ledger('acct-a')).toEqual([]);
  });

  it('another currency than USD: 200, counted, nothing written, not converted', async () => {
    const intent = stripe.intent('acct-a', 1_000, 'eur');
    const before = counters();
    const session = checkoutSession('acct-a', intent, 1_000, { currency: 'eur' });
    expect((await post(stripeEvent('checkout.session.completed', session))).body.outcome).toBe(
      'not-credited',
    );
    const ch = charge(intent, 1_000, 1_000, { currency: 'eur' });
    await post(stripeEvent('charge.refunded', ch));
    expect(paymentCounters.unknownAccounts).toBe(before.unknownAccounts + 2);
    expect(ledger('acct-a')).toEqual([]);
  });

  it('event types it does not handle: 200, ignored, no call to Stripe or the store', async () => {
    const intent = stripe.intent('acct-a', 1_000);
    for (const type of [
      'payment_intent.succeeded',
      'charge.succeeded',
      'customer.created',
      'charge.dispute.closed',
    ]) {
      expect(
        (await post(stripeEvent(type, { id: intent, object: 'payment_intent', amount: 1_000 }))).body.outcome,
      ).toBe('ignored');
    }
    expect(stripe.calls).toEqual([]);
    expect(ledger('acct-a')).toEqual([]);
  });

  it('a store that fails: 500 (Stripe sends it again), counted; the retry credits once', async () => {
    const { completed } = paidSession('acct-a', 1_000);
    const topUp = store.topUp.bind(store);
    store.topUp = async () => {
      throw new Error('ProvisionedThroughputExceededException');
    };
    const before = counters();
    expect((await post(completed)).status).toBe(500);
    expect(paymentCounters.failures).toBe(before.failures + 1);
    store.topUp = topUp;
    expect((await post(completed)).body.outcome).toBe('credited');
    expect(await balance('acct-a')).toBe(1_000n * CENT);
  });
});
