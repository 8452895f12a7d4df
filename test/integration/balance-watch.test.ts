/**
 * The balance watch end to end on the local stack (DynamoDB Local behind the IAM layer, the Stripe
 * stand-in, the SES stand-in): 200 settlements at once take an account below its alert threshold and
 * two watch runs at once, then a third, send exactly one e-mail (through SES v2 SendEmail, signed);
 * after a top-up above it, the next crossing sends the second. Auto top-up: 200 settlements at once
 * take it below X, two runs at once create exactly one off-session PaymentIntent at the stand-in,
 * and the webhook, sent its event three times and out of order, credits exactly Y once; a decline
 * and an authentication_required switch it off, store the reason, e-mail the customer and credit
 * nothing; so does a card Stripe no longer has (its payment method detached, its customer deleted:
 * a 400 Stripe answers as it does), which is not asked again. An e-mail SES refuses for good is dead-lettered once, not retried. The watch runs with its own role (every DynamoDB call held to its synthesized policy), the
 * payments function with its own, the dashboard with its own: a refused call fails this file.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { WatchItems } from '../../functions/adapters/dynamodb/watch.js';
import { MAX_SEND_ATTEMPTS } from '../../functions/balance-watch/outbox.js';
import type { ChargeEntry } from '../../functions/core/store.js';
import { createSaveCardCheckout } from '../../functions/payments/checkout.js';
import { stripeApi, stripeClient } from '../../functions/payments/stripe-api.js';
import { localPolicies } from '../../lib/local/iam-policies.js';
import type { LocalStack } from '../../lib/local/stack.js';
import { Browser, formAction } from '../support/browser.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

const CENT = 10_000_000n;
let target: Target;
let local: LocalStack;
let store: DynamoStore;
let watches: WatchItems;

beforeAll(async () => {
  // The watch's runs driven by the test itself: the stream's delivery off (balance-watch-stream.test.ts has it).
  target = await startTarget({ watchStream: false });
  local = target.local as LocalStack;
  store = target.admin.store as DynamoStore;
  watches = new WatchItems({ client: store.client, tables: store.tables, wire: store.wire });
}, 120_000);

afterAll(async () => {
  await target?.stop();
});

let generation = 0;
/** `count` settlements of `cents` each, all at once, as the completions function writes them. */
async function settleAtOnce(accountId: string, count: number, cents: number): Promise<void> {
  const settler = local.storeAs('completions');
  const outcomes = await Promise.all(
    Array.from({ length: count }, () => {
      generation += 1;
      const entry: ChargeEntry = {
        accountId,
        generationId: `gen-watch-${Date.now().toString(36)}-${generation}`,
        keyId: 'key_watch',
        tier: 'svc-fast',
        upstreamModel: 'sim',
        promptTokens: 1,
        completionTokens: 1,
        cachedTokens: 0,
        upstreamCostUsd: '0',
        billedNano: BigInt(cents) * CENT,
        estimated: false,
        createdAt: new Date().toISOString(),
      };
      return settler.settleCharge(entry);
    }),
  );
  expect(outcomes.every((outcome) => outcome === 'settled')).toBe(true);
}

const balance = async (accountId: string) => (await store.getAccount(accountId))?.balanceNano;
/** Each account's customer its own address, so that a test reads its account's e-mails only (they name no account id). */
const addressOf = (accountId: string) => `owner-${accountId}@example.com`;
const mailTo = (accountId: string) => local.ses.messages.filter((m) => m.to.includes(addressOf(accountId)));
const api = () => stripeApi(stripeClient({ apiKey: local.stripe.apiKey, apiBase: local.stripe.url }));
const intentsOf = (accountId: string) =>
  [...local.stripe.stripe.paymentIntents.values()].filter(
    (pi) =>
      (pi.metadata as Record<string, string>).accountId === accountId &&
      (pi.metadata as Record<string, string>).kind === 'auto_top_up',
  );

/** Saves a card through Checkout (setup_future_usage off_session), paying `cents`: the webhook records it. */
async function saveCard(accountId: string, cents: number): Promise<void> {
  const session = await createSaveCardCheckout(api(), {
    accountId,
    amountCents: cents,
    successUrl: 'http://127.0.0.1/billing?session={CHECKOUT_SESSION_ID}',
    cancelUrl: 'http://127.0.0.1/billing',
  });
  await local.stripe.stripe.pay(session.id);
  await local.stripe.stripe.idle();
}

describe('low-balance alert', () => {
  it('200 settlements crossing at once, two runs at once and a third: one e-mail; a top-up above and a second crossing: a second', async () => {
    const { accountId } = await newAccount(target, '10');
    await watches.setAlert(accountId, 500, addressOf(accountId), new Date().toISOString());
    await local.watch();
    expect(mailTo(accountId)).toEqual([]);

    await settleAtOnce(accountId, 200, 3);
    expect(await balance(accountId)).toBe(400n * CENT);
    await Promise.all([local.watch(), local.watch()]);
    await local.watch();
    const first = mailTo(accountId);
    expect(first).toHaveLength(1);
    expect(first[0]).toMatchObject({ from: local.ses.sender, to: [addressOf(accountId)] });
    expect(first[0]?.subject).toContain('$5.00');
    expect(first[0]?.text).toContain('$4.00');
    expect(first[0]?.service).toBe('ses');

    await store.topUp(accountId, 'manual-watch', 1_000n * CENT, new Date().toISOString());
    await local.watch();
    expect((await watches.getWatch(accountId))?.alertState).toBe('armed');
    await settleAtOnce(accountId, 200, 5);
    await Promise.all([local.watch(), local.watch()]);
    await local.watch();
    expect(mailTo(accountId)).toHaveLength(2);
  });

  it('an e-mail SES keeps refusing (a sender not verified yet: not for good) is tried again, dead-lettered after its last attempt, then neither sent nor a failure', async () => {
    const { accountId } = await newAccount(target, '10');
    await watches.setAlert(accountId, 5_000, addressOf(accountId), new Date().toISOString());
    // Each run ten minutes after the last, past the lease the run before took on the e-mail.
    let clock = Date.now();
    const later = () => {
      clock += 10 * 60_000;
      const at = new Date(clock);
      return () => at;
    };
    const run = () => local.watch({ from: 'not-verified@example.com', now: later() });
    const mine = async () => (await watches.deadLetters()).filter((d) => d.accountId === accountId);
    for (let attempt = 1; attempt < MAX_SEND_ATTEMPTS; attempt++) {
      expect((await run()).failures, `attempt ${attempt}`).toBeGreaterThanOrEqual(1);
      expect(await mine()).toEqual([]);
    }
    const last = await run();
    expect(last.deadLettered).toBeGreaterThanOrEqual(1);
    const dead = await mine();
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({ to: addressOf(accountId), attempts: MAX_SEND_ATTEMPTS });
    expect((await watches.pendingMessages()).filter((m) => m.accountId === accountId)).toEqual([]);
    // The next run (the verified sender again) neither sends it nor fails on it.
    expect(await local.watch({ now: later() })).toMatchObject({ failures: 0 });
    expect(mailTo(accountId)).toEqual([]);
    expect((await watches.getWatch(accountId))?.alertState).toBe('sent');
  });

  it('refuses an unsigned SendEmail as SES does', async () => {
    const response = await fetch(`${local.ses.url}/v2/email/outbound-emails`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ FromEmailAddress: local.ses.sender, Destination: { ToAddresses: ['a@b.c'] } }),
    });
    expect(response.status).toBe(403);
  });
});

describe('auto top-up', () => {
  it('200 settlements crossing X, two runs at once: one PaymentIntent; its event three times, out of order: Y credited once', async () => {
    const { accountId } = await newAccount(target, '10');
    await saveCard(accountId, 2_000);
    expect(await balance(accountId)).toBe(3_000n * CENT);
    const saved = await watches.getWatch(accountId);
    expect(saved?.autoTopUp).toMatchObject({ cardBrand: 'visa', cardLast4: '4242' });
    expect(saved?.autoTopUp?.paymentMethod).toMatch(/^pm_/);
    expect(saved?.autoTopUp?.customer).toMatch(/^cus_/);
    await watches.setAutoTopUp(
      accountId,
      { belowCents: 800, buyCents: 2_000, enabled: true },
      addressOf(accountId),
      new Date().toISOString(),
    );

    await settleAtOnce(accountId, 200, 12);
    expect(await balance(accountId)).toBe(600n * CENT);
    local.stripe.stripe.hold();
    await Promise.all([local.watch(), local.watch()]);
    await local.watch();
    expect(intentsOf(accountId)).toHaveLength(1);
    const intent = intentsOf(accountId)[0];
    expect(intent).toMatchObject({
      amount: 2_000,
      currency: 'usd',
      status: 'succeeded',
      customer: saved?.autoTopUp?.customer,
    });
    expect((await watches.getWatch(accountId))?.inFlight).toMatchObject({
      seq: 1,
      paymentIntent: intent?.id,
    });
    expect(await balance(accountId)).toBe(600n * CENT);

    // The held event (payment_intent.succeeded), three times, then once more in reverse with the others.
    const held = local.stripe.stripe.heldEvents();
    const succeeded = held.find((e) => e.type === 'payment_intent.succeeded');
    expect(succeeded).toBeDefined();
    const ids = held.map((e) => e.id);
    await local.stripe.stripe.release(
      [...ids].reverse().concat(String(succeeded?.id), String(succeeded?.id)),
    );
    await local.stripe.stripe.idle();
    expect(await balance(accountId)).toBe(2_600n * CENT);
    expect((await watches.getWatch(accountId))?.inFlight).toBeUndefined();
    const entries = (await store.listLedger(accountId)).filter(
      (e) => e.entryId === `topup#stripe:${intent?.id}`,
    );
    expect(entries.map((e) => e.deltaNano)).toEqual([2_000n * CENT]);
    // Above X now: nothing more is bought.
    await local.watch();
    expect(intentsOf(accountId)).toHaveLength(1);
  });

  it.each(['card_declined', 'authentication_required'] as const)(
    'a %s switches it off, stores the reason, e-mails the customer and credits nothing',
    async (code) => {
      const { accountId } = await newAccount(target, '10');
      await saveCard(accountId, 1_000);
      await watches.setAutoTopUp(
        accountId,
        { belowCents: 1_500, buyCents: 5_000, enabled: true },
        addressOf(accountId),
        new Date().toISOString(),
      );
      await settleAtOnce(accountId, 200, 3);
      expect(await balance(accountId)).toBe(1_400n * CENT);
      local.stripe.stripe.failNextOffSession(code);
      await Promise.all([local.watch(), local.watch()]);
      await local.stripe.stripe.idle();
      const watch = await watches.getWatch(accountId);
      expect(watch?.autoTopUp?.enabled).toBe(false);
      expect(watch?.autoTopUp?.offReason).toContain(code);
      expect(watch?.inFlight).toBeUndefined();
      const intents = intentsOf(accountId);
      expect(intents).toHaveLength(1);
      expect(intents[0]?.status).toBe('requires_payment_method');
      expect(
        local.stripe.stripe.deliveries.filter((d) => d.type === 'payment_intent.payment_failed').at(-1),
      ).toMatchObject({ status: 200 });
      await local.watch();
      const mails = mailTo(accountId);
      expect(mails).toHaveLength(1);
      expect(mails[0]?.subject).toMatch(/auto top-up/i);
      expect(mails[0]?.text).toContain(code);
      expect(await balance(accountId)).toBe(1_400n * CENT);
      await local.watch();
      expect(intentsOf(accountId)).toHaveLength(1);
    },
  );
});

describe('auto top-up on a card Stripe no longer has', () => {
  it.each([
    ['the payment method detached', 'invalid_request_error'],
    ['the customer deleted', 'resource_missing'],
  ] as const)(
    '%s: switched off with the reason (%s), the customer e-mailed, not asked again',
    async (what, code) => {
      const { accountId } = await newAccount(target, '10');
      await saveCard(accountId, 1_000);
      await watches.setAutoTopUp(
        accountId,
        { belowCents: 2_500, buyCents: 5_000, enabled: true },
        addressOf(accountId),
        new Date().toISOString(),
      );
      const card = (await watches.getWatch(accountId))?.autoTopUp;
      const sdk = stripeClient({ apiKey: local.stripe.apiKey, apiBase: local.stripe.url });
      if (what === 'the customer deleted') await sdk.customers.del(String(card?.customer));
      else await sdk.paymentMethods.detach(String(card?.paymentMethod));

      const run = await local.watch();
      expect(run.failures).toBe(0);
      const watch = await watches.getWatch(accountId);
      expect(watch?.autoTopUp?.enabled).toBe(false);
      expect(watch?.autoTopUp?.offReason).toContain(code);
      expect(watch?.inFlight).toBeUndefined();
      expect(intentsOf(accountId)).toEqual([]);
      const mails = mailTo(accountId);
      expect(mails).toHaveLength(1);
      expect(mails[0]?.subject).toMatch(/auto top-up/i);
      expect(mails[0]?.text).toContain(code);
      expect(await local.watch()).toMatchObject({ failures: 0 });
      expect(mailTo(accountId)).toHaveLength(1);
      expect(await balance(accountId)).toBe(2_000n * CENT);
    },
  );
});

describe('the Billing page', () => {
  it('sets an alert and auto top-up within bounds, saves a card through Checkout, shows why auto top-up went off; another card saved reuses the Customer', async () => {
    const browser = new Browser();
    const origin = local.emulator.url;
    const signInPage = await browser.open(`${origin}/dashboard/sign-in`);
    await browser.submit(signInPage, formAction(signInPage.body, /\/interaction\//), {
      email: local.oidc.user.email,
      password: local.oidc.user.password,
    });
    const accountId = (await store.accountOfUser(local.oidc.user.subject)) as string;
    const post = (path: string, form: Record<string, string>) =>
      browser.fetch(`${origin}${path}`, { form, origin });

    const refused = await post('/dashboard/billing/auto-top-up', { below: '0.50', buy: '20', enabled: 'on' });
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain('from $1.00 to $1,000.00');
    const alert = await post('/dashboard/billing/alert', { threshold: '5' });
    expect(alert.status).toBe(303);
    expect(alert.headers.get('location')).toBe('/dashboard/billing');
    const saved = await watches.getWatch(accountId);
    expect(saved).toMatchObject({ thresholdCents: 500, email: local.oidc.user.email });

    // Save a card: Checkout for the top-up amount, paid on the stand-in's page.
    const checkout = await browser.fetch(`${origin}/dashboard/billing/auto-top-up/card`, {
      form: { buy: '20' },
      origin,
    });
    expect(checkout.status).toBe(303);
    const sessionUrl = String(checkout.headers.get('location'));
    const session = local.stripe.stripe.sessions.get(String(sessionUrl.split('/').pop()));
    // For the account's own Customer, made before it (its invoices carry the billing profile).
    expect(session).toMatchObject({ customer_creation: null, mode: 'payment', amount_total: 2_000 });
    await local.stripe.stripe.pay(String(session?.id));
    await local.stripe.stripe.idle();
    const on = await browser.open(`${origin}/dashboard/billing/auto-top-up`, {
      form: { below: '10', buy: '20', enabled: 'on' },
      origin,
    });
    const page = on.body;
    expect(on.url).toBe(`${origin}/dashboard/billing`);
    expect(page).toContain('4242');
    expect((await watches.getWatch(accountId))?.autoTopUp).toMatchObject({
      belowCents: 1_000,
      buyCents: 2_000,
      enabled: true,
    });

    // A decline: the page says why it is off.
    await store.removeCredits(accountId, 'spent-watch', 1_500n * CENT, new Date().toISOString());
    local.stripe.stripe.failNextOffSession('card_declined');
    await local.watch();
    await local.stripe.stripe.idle();
    const billing = await (await browser.fetch(`${origin}/dashboard/billing`)).text();
    expect(billing).toContain('switched off');
    expect(billing).toContain('card_declined');

    // Another card saved: Checkout names the account's Customer, and no second Customer is made.
    const customer = (await watches.getWatch(accountId))?.autoTopUp?.customer;
    expect(customer).toMatch(/^cus_/);
    const customers = local.stripe.stripe.customers.size;
    const again = await browser.fetch(`${origin}/dashboard/billing/auto-top-up/card`, {
      form: { buy: '20' },
      origin,
    });
    expect(again.status).toBe(303);
    const secondId = String(String(again.headers.get('location')).split('/').pop());
    expect(local.stripe.stripe.sessions.get(secondId)).toMatchObject({ customer, customer_creation: null });
    await local.stripe.stripe.pay(secondId);
    await local.stripe.stripe.idle();
    expect(local.stripe.stripe.customers.size).toBe(customers);
    const recorded = (await watches.getWatch(accountId))?.autoTopUp;
    expect(recorded?.customer).toBe(customer);
    expect(recorded?.paymentMethod).toBe(
      local.stripe.stripe.paymentIntents.get(
        String(local.stripe.stripe.sessions.get(secondId)?.payment_intent),
      )?.payment_method,
    );
  });
});

describe("the watch's lookup of an auto top-up whose event was lost", () => {
  it('credits it once on a split account and clears the in-flight mark; the event arriving late moves nothing', async () => {
    const { accountId } = await newAccount(target, '10');
    await saveCard(accountId, 2_000);
    expect(await store.splitAccount(accountId, 2)).toBe(2);
    await watches.setAutoTopUp(
      accountId,
      { belowCents: 4_000, buyCents: 2_500, enabled: true },
      'dev@example.com',
      new Date().toISOString(),
    );
    // The webhook gets nothing: its payment_intent.succeeded is held (lost, as far as it knows).
    local.stripe.stripe.hold();
    await local.watch();
    const inFlight = (await watches.getWatch(accountId))?.inFlight;
    expect(inFlight?.paymentIntent).toMatch(/^pi_/);
    // Younger than the lookup's wait: left alone.
    await local.watch();
    expect((await watches.getWatch(accountId))?.inFlight).toEqual(inFlight);
    expect(await balance(accountId)).toBe(3_000n * CENT);
    // Six minutes on: looked up at Stripe (succeeded), credited once, the mark cleared.
    await local.watch({ now: () => new Date(Date.now() + 6 * 60_000) });
    expect((await watches.getWatch(accountId))?.inFlight).toBeUndefined();
    expect(await balance(accountId)).toBe(5_500n * CENT);
    const entries = async () =>
      (await store.listLedger(accountId)).filter(
        (e) => e.entryId === `topup#stripe:${inFlight?.paymentIntent}`,
      );
    expect((await entries()).map((e) => e.deltaNano)).toEqual([2_500n * CENT]);
    // The event delivered after all, twice: nothing more.
    const held = local.stripe.stripe.heldEvents().map((e) => e.id);
    await local.stripe.stripe.release([...held, ...held]);
    await local.stripe.stripe.idle();
    expect(
      local.stripe.stripe.deliveries.filter((d) => held.includes(d.eventId)).every((d) => d.status === 200),
    ).toBe(true);
    expect(await balance(accountId)).toBe(5_500n * CENT);
    expect(await entries()).toHaveLength(1);
  });
});

describe("the balance watch's role", () => {
  it('needed every DynamoDB permission the stack grants it, and no other', async () => {
    const table = (arn: string) =>
      arn.replace(/^arn:aws:dynamodb:[^:]+:\d+:table\/HostedModelApi-sandbox-/, '');
    const used = new Set(
      local.iam
        .allowed()
        .filter((p) => p.principal === 'balanceWatch')
        .map((p) => `${p.action} ${table(p.resource)}`),
    );
    const granted = (await localPolicies()).principals.balanceWatch.statements
      .filter((s) => s.effect === 'Allow')
      .flatMap((s) =>
        s.actions
          .filter((a) => a.startsWith('dynamodb:'))
          .flatMap((a) => s.resources.map((r) => `${a} ${table(r)}`)),
      );
    // The stream's reads are the event source mapping's, off in this file: balance-watch-stream.test.ts
    // has them. ListStreams is Lambda's check of the role when the mapping is made; no poll calls it.
    const stream = ['DescribeStream', 'GetShardIterator', 'GetRecords', 'ListStreams'].map(
      (a) => `dynamodb:${a} accounts/stream/*`,
    );
    expect([...used].sort()).toEqual([...new Set(granted)].filter((p) => !stream.includes(p)).sort());
    expect([...used].sort()).toEqual([
      'dynamodb:DeleteItem dashboard',
      'dynamodb:GetItem accounts',
      // A watch item read (an account a stream batch names), the safety sweep's place.
      'dynamodb:GetItem dashboard',
      // An auto top-up looked up and credited: its audit entry, its ledger entry, the balance, a
      // transfer between slices.
      'dynamodb:PutItem audit',
      'dynamodb:PutItem dashboard',
      'dynamodb:PutItem holds',
      'dynamodb:PutItem ledger',
      'dynamodb:Query dashboard/index/watchList',
      'dynamodb:UpdateItem accounts',
      'dynamodb:UpdateItem dashboard',
    ]);
  });
});
