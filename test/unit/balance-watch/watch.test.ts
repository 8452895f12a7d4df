/**
 * The balance watch's state machines on the in-memory WatchStore (test/support/memory-watch.ts): one
 * e-mail per crossing whatever number of runs overlap, one PaymentIntent per crossing with its
 * idempotency key, a decline or authentication_required switching auto top-up off with its reason and
 * an e-mail, a top-up stuck without its PaymentIntent asked for again with the same key; and the
 * bounds of the amounts the customer types.
 */
import { describe, expect, it } from 'vitest';
import { AwsCallError } from '../../../functions/adapters/aws-call.js';
import { permanentSesError } from '../../../functions/adapters/ses.js';
import { MAX_SEND_ATTEMPTS } from '../../../functions/balance-watch/outbox.js';
import { runWatch, type WatchDeps } from '../../../functions/balance-watch/watch.js';
import type { AccountRecord } from '../../../functions/core/store.js';
import {
  alertThresholdCents,
  autoTopUpCents,
  InvalidPurchaseAmountError,
} from '../../../functions/payments/amounts.js';
import type { OffSessionPayments, OffSessionRequest } from '../../../functions/payments/stripe-api.js';
import { MemoryWatchStore } from '../../support/memory-watch.js';

const CENT = 10_000_000n;

function setup(balanceCents: number, account = 'acct') {
  const watches = new MemoryWatchStore();
  const balances = new Map<string, bigint>([[account, BigInt(balanceCents) * CENT]]);
  const sent: { to: string; subject: string; text: string }[] = [];
  const created: { request: OffSessionRequest; key: string }[] = [];
  let nextOutcome: 'ok' | 'card_declined' | 'authentication_required' | 'network' = 'ok';
  const payments: OffSessionPayments = {
    async createOffSession(request, key) {
      created.push({ request, key });
      // Two calls with one key are one payment at Stripe: the same id.
      const id = `pi_${key}`;
      const outcome = nextOutcome;
      if (outcome === 'network') throw new Error('socket hang up');
      if (outcome !== 'ok')
        return {
          kind: 'declined',
          code: outcome,
          message: `Your card was declined (${outcome}).`,
          paymentIntent: id,
        };
      return { kind: 'created', paymentIntent: id, status: 'succeeded' };
    },
  };
  let clock = Date.parse('2026-12-01T00:00:00Z');
  const deps: WatchDeps = {
    watches,
    store: {
      async getAccount(accountId: string) {
        const balance = balances.get(accountId);
        return balance === undefined
          ? undefined
          : ({ accountId, status: 'active', balanceNano: balance, heldNano: 0n, slices: 1 } as AccountRecord);
      },
    },
    payments: async () => payments,
    mailer: {
      async send(message) {
        sent.push(message);
        return `msg-${sent.length}`;
      },
    },
    from: 'alerts@example.com',
    now: () => new Date(clock),
    billingUrl: 'https://example.com/dashboard/billing',
  };
  return {
    watches,
    deps,
    sent,
    created,
    setBalance: (cents: number) => balances.set(account, BigInt(cents) * CENT),
    fail: (outcome: typeof nextOutcome) => {
      nextOutcome = outcome;
    },
    advance: (ms: number) => {
      clock += ms;
    },
  };
}

describe('low-balance alert', () => {
  it('e-mails once per crossing however many runs overlap, and again only after a rise above', async () => {
    const t = setup(2_000);
    await t.watches.setAlert('acct', 1_000, 'dev@example.com', '2026-12-01T00:00:00Z');
    await runWatch(t.deps);
    expect(t.sent).toEqual([]);
    t.setBalance(999);
    await Promise.all([runWatch(t.deps), runWatch(t.deps)]);
    await runWatch(t.deps);
    expect(t.sent).toHaveLength(1);
    expect(t.sent[0]).toMatchObject({ to: 'dev@example.com' });
    expect(t.sent[0]?.text).toContain('$9.99');
    expect(t.watches.outbox.size).toBe(0);
    // Still below: nothing more. A top-up above re-arms; the next crossing e-mails again.
    await runWatch(t.deps);
    t.setBalance(1_000);
    await runWatch(t.deps);
    expect((await t.watches.getWatch('acct'))?.alertState).toBe('armed');
    t.setBalance(5);
    await Promise.all([runWatch(t.deps), runWatch(t.deps), runWatch(t.deps)]);
    expect(t.sent).toHaveLength(2);
  });

  it('keeps an e-mail SES did not take in the outbox, and sends it at the next run', async () => {
    const t = setup(0);
    await t.watches.setAlert('acct', 1_000, 'dev@example.com', '2026-12-01T00:00:00Z');
    const send = t.deps.mailer.send;
    t.deps.mailer.send = async () => {
      throw new Error('SES unreachable');
    };
    await runWatch(t.deps);
    expect(t.watches.outbox.size).toBe(1);
    t.deps.mailer.send = send;
    t.advance(10 * 60_000);
    await runWatch(t.deps);
    expect(t.sent).toHaveLength(1);
    expect(t.watches.outbox.size).toBe(0);
  });
});

describe('an e-mail SES will not take', () => {
  async function queued(t: ReturnType<typeof setup>) {
    await t.watches.setAlert('acct', 1_000, 'dev@example.com', '2026-12-01T00:00:00Z');
    t.deps.mailer.permanent = permanentSesError;
  }

  it('refused for good (MessageRejected): dead-lettered at once, not a failure, and never sent again', async () => {
    const t = setup(0);
    await queued(t);
    const tried: string[] = [];
    t.deps.mailer.send = async (message) => {
      tried.push(message.to);
      // As sendEmail marks it (functions/adapters/ses.ts): SES named the recipient, not the sender.
      throw Object.assign(
        new AwsCallError(
          'MessageRejected',
          `Email address is not verified. The following identities failed the check: ${message.to}`,
          false,
        ),
        { permanent: true },
      );
    };
    const first = await runWatch(t.deps);
    expect(first).toMatchObject({ alerts: 1, sent: 0, deadLettered: 1, failures: 0 });
    expect(t.watches.outbox.size).toBe(0);
    const dead = await t.watches.deadLetters();
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({ to: 'dev@example.com', attempts: 1 });
    expect(dead[0]?.reason).toContain('MessageRejected');
    // Later runs are clean: the watch's error alarm means something again.
    for (let run = 0; run < 3; run++) {
      t.advance(10 * 60_000);
      expect(await runWatch(t.deps)).toMatchObject({ deadLettered: 0, failures: 0 });
    }
    expect(tried).toHaveLength(1);
  });

  it(`failing for a reason that may pass: retried, a failure each run, dead-lettered at attempt ${MAX_SEND_ATTEMPTS}`, async () => {
    const t = setup(0);
    await queued(t);
    t.deps.mailer.send = async () => {
      throw new AwsCallError('AccessDeniedException', 'not authorized to perform ses:SendEmail', false);
    };
    const runs = [];
    for (let run = 0; run < MAX_SEND_ATTEMPTS + 2; run++) {
      runs.push(await runWatch(t.deps));
      t.advance(10 * 60_000);
    }
    expect(runs.map((r) => r.failures)).toEqual([
      ...Array.from({ length: MAX_SEND_ATTEMPTS - 1 }, () => 1),
      0,
      0,
      0,
    ]);
    expect(runs.map((r) => r.deadLettered).reduce((a, b) => a + b)).toBe(1);
    expect(t.watches.outbox.size).toBe(0);
    expect((await t.watches.deadLetters())[0]?.reason).toContain(
      `${MAX_SEND_ATTEMPTS} attempts failed, the last: AccessDeniedException`,
    );
  });

  it('an outage that passes: sent, never dead-lettered', async () => {
    const t = setup(0);
    await queued(t);
    const send = t.deps.mailer.send;
    t.deps.mailer.send = async () => {
      throw new AwsCallError('TooManyRequestsException', 'Maximum sending rate exceeded.', true);
    };
    await runWatch(t.deps);
    t.advance(10 * 60_000);
    await runWatch(t.deps);
    t.deps.mailer.send = send;
    t.advance(10 * 60_000);
    expect(await runWatch(t.deps)).toMatchObject({ sent: 1, deadLettered: 0, failures: 0 });
    expect(await t.watches.deadLetters()).toEqual([]);
  });
});

describe('auto top-up', () => {
  async function withCard(t: ReturnType<typeof setup>) {
    await t.watches.recordCard(
      'acct',
      { customer: 'cus_1', paymentMethod: 'pm_1', brand: 'visa', last4: '4242', from: 1 },
      'now',
    );
    await t.watches.setAutoTopUp(
      'acct',
      { belowCents: 500, buyCents: 2_000, enabled: true },
      'dev@example.com',
      'now',
    );
  }

  it('starts one off-session payment per crossing, keyed by account and sequence number', async () => {
    const t = setup(400);
    await withCard(t);
    await Promise.all([runWatch(t.deps), runWatch(t.deps)]);
    await runWatch(t.deps);
    expect(t.created).toHaveLength(1);
    expect(t.created[0]).toEqual({
      key: 'auto-top-up:acct:1',
      request: { accountId: 'acct', seq: 1, amountCents: 2_000, customer: 'cus_1', paymentMethod: 'pm_1' },
    });
    expect((await t.watches.getWatch('acct'))?.inFlight).toMatchObject({
      seq: 1,
      paymentIntent: 'pi_auto-top-up:acct:1',
    });
    // The webhook credits it and clears the mark; above X nothing more is bought.
    expect(await t.watches.finishTopUp('acct', 1)).toBe(true);
    t.setBalance(2_400);
    await runWatch(t.deps);
    expect(t.created).toHaveLength(1);
    // The next crossing is the next sequence number.
    t.setBalance(100);
    await runWatch(t.deps);
    expect(t.created.map((c) => c.key)).toEqual(['auto-top-up:acct:1', 'auto-top-up:acct:2']);
  });

  it.each(['card_declined', 'authentication_required'] as const)(
    'a %s switches it off with the reason and e-mails the customer, and buys nothing more',
    async (code) => {
      const t = setup(100);
      await withCard(t);
      t.fail(code);
      await Promise.all([runWatch(t.deps), runWatch(t.deps)]);
      const watch = await t.watches.getWatch('acct');
      expect(watch?.autoTopUp).toMatchObject({ enabled: false });
      expect(watch?.autoTopUp?.offReason).toContain(code);
      expect(watch?.inFlight).toBeUndefined();
      expect(t.sent).toHaveLength(1);
      expect(t.sent[0]?.subject).toMatch(/auto top-up/i);
      t.fail('ok');
      await runWatch(t.deps);
      expect(t.created).toHaveLength(1);
      // The webhook's payment_intent.payment_failed for the same top-up changes nothing more.
      expect(await t.watches.switchOff('acct', 1, code, { to: 'x', subject: 's', text: 't' }, 'now')).toBe(
        false,
      );
    },
  );

  it('asks Stripe again with the same key for a top-up left without its PaymentIntent for over a minute', async () => {
    const t = setup(100);
    await withCard(t);
    t.fail('network');
    await runWatch(t.deps);
    expect((await t.watches.getWatch('acct'))?.inFlight).toMatchObject({ seq: 1 });
    t.fail('ok');
    await runWatch(t.deps);
    expect(t.created).toHaveLength(1);
    t.advance(61_000);
    await runWatch(t.deps);
    expect(t.created.map((c) => c.key)).toEqual(['auto-top-up:acct:1', 'auto-top-up:acct:1']);
    expect((await t.watches.getWatch('acct'))?.inFlight?.paymentIntent).toBe('pi_auto-top-up:acct:1');
  });
});

describe('what the e-mails call the account', () => {
  // A dashboard account's id as its first sign-in makes it (functions/dashboard/accounts.ts): the
  // customer never sees it, so an e-mail naming the account by it names nothing they know.
  const ACCOUNT = 'acct-5d41402abc4b2a76b9719d91';

  it('the low-balance alert: "your account" and the address it was set up with, not the account id', async () => {
    const t = setup(2_000, ACCOUNT);
    await t.watches.setAlert(ACCOUNT, 1_000, 'ann@example.com', '2026-12-01T00:00:00Z');
    t.setBalance(999);
    await runWatch(t.deps);
    expect(t.sent).toHaveLength(1);
    expect(t.sent[0]?.text).toContain('your account (ann@example.com)');
    expect(`${t.sent[0]?.subject}\n${t.sent[0]?.text}`).not.toContain(ACCOUNT);
  });

  it('auto top-up switched off: the same', async () => {
    const t = setup(100, ACCOUNT);
    await t.watches.recordCard(
      ACCOUNT,
      { customer: 'cus_1', paymentMethod: 'pm_1', brand: 'visa', last4: '4242', from: 1 },
      'now',
    );
    await t.watches.setAutoTopUp(
      ACCOUNT,
      { belowCents: 500, buyCents: 2_000, enabled: true },
      'ann@example.com',
      'now',
    );
    t.fail('card_declined');
    await runWatch(t.deps);
    expect(t.sent).toHaveLength(1);
    expect(t.sent[0]?.text).toContain('your account (ann@example.com)');
    expect(`${t.sent[0]?.subject}\n${t.sent[0]?.text}`).not.toContain(ACCOUNT);
  });
});

describe('the amounts a customer types', () => {
  it('holds auto top-up to X from $1 to $1,000 and Y from $5 to $1,000, in whole cents', () => {
    expect(autoTopUpCents('1', '5')).toEqual({ belowCents: 100, buyCents: 500 });
    expect(autoTopUpCents('1000', '1000.00')).toEqual({ belowCents: 100_000, buyCents: 100_000 });
    expect(autoTopUpCents('12.34', '25.5')).toEqual({ belowCents: 1_234, buyCents: 2_550 });
    for (const [below, buy] of [
      ['0.99', '10'],
      ['1000.01', '10'],
      ['10', '4.99'],
      ['10', '1000.01'],
      ['10.001', '10'],
      ['10', 'abc'],
      ['', '10'],
      ['-5', '10'],
    ] as const)
      expect(() => autoTopUpCents(below, buy), `${below} ${buy}`).toThrow(InvalidPurchaseAmountError);
  });

  it('holds the alert threshold to whole cents from $1 to $10,000', () => {
    expect(alertThresholdCents('5')).toBe(500);
    expect(alertThresholdCents('10000')).toBe(1_000_000);
    for (const bad of ['0.5', '10000.01', '1.234', 'x', ''])
      expect(() => alertThresholdCents(bad), bad).toThrow(InvalidPurchaseAmountError);
  });
});
