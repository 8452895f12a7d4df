/**
 * The balance watch's work on an account (handler.ts runs it three ways): its balance over all its
 * slices (one exact snapshot, `Store.getAccount`), then the low-balance alert's and the auto top-up's
 * state machines (functions/core/watch.ts), each transition one conditional write; then the outbox
 * (outbox.ts). Which accounts:
 * - `watchAccounts`: those the accounts table's stream says crossed a level (stream.ts), as the
 *   balance changes: the work grows with the crossings, not with the accounts;
 * - `runWatch`: the safety sweep (hourly): every watched account, a page at a time, within a time
 *   budget, going on next run where it stopped; it catches what a lost stream record missed, and the
 *   auto top-ups in flight too long (looked up at Stripe);
 * - `sendOutbox` alone: the e-mails queued by the dashboard (every few minutes).
 * Never on the request path: a settlement and its reply wait for none of this. Two runs at once (a
 * stream batch retried beside a sweep) act once: of two identical conditional writes one fails, and
 * of two claims one.
 */

import type { Store } from '../core/store.js';
import {
  autoTopUpIdempotencyKey,
  switchedOffMessage,
  type Watch,
  type WatchStore,
  yourAccount,
} from '../core/watch.js';
import { centsToNano } from '../payments/amounts.js';
import type { OffSessionPayments } from '../payments/stripe-api.js';
import { logger } from '../shared/observability.js';
import { LOOK_UP_AFTER_MS } from './lookup.js';
import { type Mailer, sendOutbox } from './outbox.js';

export interface WatchDeps {
  watches: WatchStore;
  store: Pick<Store, 'getAccount'>;
  /** Stripe's off-session payments (read at first use: a run without a top-up due never asks). */
  payments: () => Promise<OffSessionPayments>;
  mailer: Mailer;
  /** The sender's address (a verified SES identity). */
  from: string;
  now: () => Date;
  /** The dashboard's billing page, linked from the e-mails. */
  billingUrl?: string;
  /** Reads a top-up in flight too long at Stripe and applies its outcome (lookup.ts). */
  lookUpTopUp?: (watch: Watch) => Promise<unknown>;
}

export interface WatchRun {
  watched: number;
  alerts: number;
  rearmed: number;
  topUps: number;
  switchedOff: number;
  sent: number;
  /** E-mails taken out of the outbox unsent (the EmailsDeadLettered metric). */
  deadLettered: number;
  /** Accounts and e-mails that failed and wait for a later run (the function's error). */
  failures: number;
}

/** A top-up in flight with no PaymentIntent recorded this long is asked for again (same key). */
const RETRY_UNANSWERED_MS = 60_000;
/** The safety sweep's page (watch items read at once) and how long it starts accounts before it stops. */
const SWEEP_PAGE = 100;
const SWEEP_BUDGET_MS = 4 * 60_000;

const usdText = (nano: bigint): string => {
  const negative = nano < 0n;
  const abs = negative ? -nano : nano;
  const cents = abs / 10_000_000n;
  const rest = abs % 10_000_000n;
  const text = `${cents / 100n}.${String(cents % 100n).padStart(2, '0')}${rest ? String(rest).padStart(7, '0').replace(/0+$/, '') : ''}`;
  return `${negative ? '-' : ''}$${text}`;
};
const centsText = (cents: number) => usdText(centsToNano(cents));

const emptyRun = (): WatchRun => ({
  watched: 0,
  alerts: 0,
  rearmed: 0,
  topUps: 0,
  switchedOff: 0,
  sent: 0,
  deadLettered: 0,
  failures: 0,
});

/** Each watch through watchOne, a few at a time (each a read and at most two writes), failures counted. */
async function watchEach(deps: WatchDeps, watches: Watch[], run: WatchRun): Promise<void> {
  run.watched += watches.length;
  const queue = [...watches];
  const worker = async () => {
    for (let watch = queue.shift(); watch; watch = queue.shift()) {
      try {
        await watchOne(deps, watch, run);
      } catch (error) {
        run.failures += 1;
        logger.error('balance watch: account failed', { accountId: watch.accountId, error });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(8, queue.length) }, worker));
}

/**
 * The safety sweep: the watched accounts a page at a time from where the last sweep stopped, until
 * the list ends (the next sweep starts over) or `budgetMs` passed (the next goes on from here); then
 * the outbox.
 */
export async function runWatch(deps: WatchDeps, budgetMs = SWEEP_BUDGET_MS): Promise<WatchRun> {
  const run = emptyRun();
  const stopAt = deps.now().getTime() + budgetMs;
  let after = await deps.watches.sweepCursor();
  for (;;) {
    const page = await deps.watches.watchPage(after, SWEEP_PAGE);
    await watchEach(deps, page.watches, run);
    after = page.next;
    if (!after || deps.now().getTime() >= stopAt) break;
  }
  await deps.watches.saveSweepCursor(after, deps.now().toISOString());
  await sendOutbox(deps, run);
  return run;
}

/** The accounts a stream batch named (stream.ts), each read as the sweep reads it; then the outbox. */
export async function watchAccounts(deps: WatchDeps, accountIds: readonly string[]): Promise<WatchRun> {
  const run = emptyRun();
  const watches: Watch[] = [];
  for (const accountId of new Set(accountIds)) {
    const watch = await deps.watches.getWatch(accountId);
    if (watch) watches.push(watch);
  }
  await watchEach(deps, watches, run);
  await sendOutbox(deps, run);
  return run;
}

/** The outbox alone (the e-mails the dashboard queued, between sweeps). */
export async function outboxRun(deps: WatchDeps): Promise<WatchRun> {
  const run = emptyRun();
  await sendOutbox(deps, run);
  return run;
}

async function watchOne(deps: WatchDeps, watch: Watch, run: WatchRun): Promise<void> {
  // A watch saved before its levels were copied onto the account's items: the stream cannot see its
  // crossings until they are (once; every change of the settings copies them again).
  if (!watch.levelsCopied) await deps.watches.copyLevels(watch.accountId, deps.now().toISOString());
  const account = await deps.store.getAccount(watch.accountId);
  if (!account) return;
  const balance = account.balanceNano;
  const now = deps.now();

  if (watch.thresholdCents !== undefined) {
    const below = balance < centsToNano(watch.thresholdCents);
    if (below && watch.alertState === 'armed') {
      const message = watch.email
        ? {
            to: watch.email,
            subject: `Your balance is below ${centsText(watch.thresholdCents)}`,
            text: [
              `The balance of ${yourAccount(watch.email)} is ${usdText(balance)}, below the ${centsText(watch.thresholdCents)} you set.`,
              '',
              `Buy credits: ${deps.billingUrl ?? 'the Billing page of your dashboard'}`,
              'You get this once each time the balance falls below the threshold.',
            ].join('\n'),
          }
        : undefined;
      if (await deps.watches.alertSent(watch.accountId, watch.alertSeq, message, now.toISOString()))
        run.alerts += 1;
    } else if (!below && watch.alertState === 'sent') {
      if (await deps.watches.rearm(watch.accountId, watch.alertSeq)) run.rearmed += 1;
    }
  }

  const auto = watch.autoTopUp;
  if (!auto?.customer || !auto.paymentMethod) return;
  if (watch.inFlight) {
    // Started by a run that stopped (or lost Stripe's answer) before recording the PaymentIntent: the
    // same idempotency key, so Stripe answers with the first result, never a second payment.
    const age = now.getTime() - Date.parse(watch.inFlight.startedAt);
    if (!watch.inFlight.paymentIntent && age > RETRY_UNANSWERED_MS)
      await charge(deps, watch, watch.inFlight.seq, run);
    // Its outcome's event lost (the webhook down): asked of Stripe instead (lookup.ts).
    else if (watch.inFlight.paymentIntent && age > LOOK_UP_AFTER_MS && deps.lookUpTopUp)
      await deps.lookUpTopUp(watch);
    return;
  }
  if (!auto.enabled || balance >= centsToNano(auto.belowCents)) return;
  const seq = watch.topUpSeq + 1;
  if (!(await deps.watches.beginTopUp(watch.accountId, seq, now.toISOString()))) return;
  run.topUps += 1;
  await charge(deps, watch, seq, run);
}

async function charge(deps: WatchDeps, watch: Watch, seq: number, run: WatchRun): Promise<void> {
  const auto = watch.autoTopUp;
  if (!auto?.customer || !auto.paymentMethod) return;
  const payments = await deps.payments();
  const result = await payments.createOffSession(
    {
      accountId: watch.accountId,
      seq,
      amountCents: auto.buyCents,
      customer: auto.customer,
      paymentMethod: auto.paymentMethod,
    },
    autoTopUpIdempotencyKey(watch.accountId, seq),
  );
  if (result.kind === 'created') {
    // The webhook (payment_intent.succeeded) credits it and clears the mark, maybe before this.
    await deps.watches.recordIntent(watch.accountId, seq, result.paymentIntent);
    logger.info('balance watch: auto top-up started', {
      accountId: watch.accountId,
      seq,
      paymentIntent: result.paymentIntent,
      status: result.status,
    });
    return;
  }
  const reason = `${result.code}: ${result.message}`;
  const switched = await deps.watches.switchOff(
    watch.accountId,
    seq,
    reason,
    switchedOffMessage(watch, auto.buyCents, reason, deps.billingUrl),
    deps.now().toISOString(),
  );
  if (switched) run.switchedOff += 1;
  logger.warn('balance watch: auto top-up declined or refused, switched off', {
    accountId: watch.accountId,
    seq,
    code: result.code,
    paymentIntent: result.paymentIntent,
  });
}
