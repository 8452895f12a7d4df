/**
 * One run of the balance watch (every minute, as the hold sweeper: handler.ts; locally the local
 * stack's timer): for each watched account, its balance over all its slices (one exact snapshot,
 * `Store.getAccount`), then the low-balance alert's and the auto top-up's state machines
 * (functions/core/watch.ts), each transition one conditional write; then the outbox, each e-mail
 * claimed (a lease), sent through SES and deleted once SES took it, or dead-lettered (out of the
 * outbox, never sent again, counted) once SES refused it for good or MAX_SEND_ATTEMPTS runs failed
 * to send it: one bad address never fails every run after it. Never on the request path: a
 * settlement and its reply wait for none of this. Two runs at once (EventBridge may deliver twice)
 * act once: of two identical conditional writes one fails, and of two claims one.
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

interface Mailer {
  /**
   * Sends one e-mail; resolves with SES's message id once SES accepted it; rejects with an error whose
   * `permanent` is true when SES will never take that message.
   */
  send(message: { from: string; to: string; subject: string; text: string }): Promise<string>;
  /** Whether `send`'s error refuses this message for good (sending it again fails the same way). */
  permanent?(error: unknown): boolean;
}

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
/** How long a run holds an e-mail it is sending before another may send it (SES answers in seconds). */
const SEND_LEASE_MS = 5 * 60_000;
/**
 * Attempts an e-mail gets when SES fails it for a reason that may pass (throttling, an outage, the
 * role or the identity misconfigured): one per lease, so about an hour. Then it is dead-lettered.
 */
export const MAX_SEND_ATTEMPTS = 12;

const usdText = (nano: bigint): string => {
  const negative = nano < 0n;
  const abs = negative ? -nano : nano;
  const cents = abs / 10_000_000n;
  const rest = abs % 10_000_000n;
  const text = `${cents / 100n}.${String(cents % 100n).padStart(2, '0')}${rest ? String(rest).padStart(7, '0').replace(/0+$/, '') : ''}`;
  return `${negative ? '-' : ''}$${text}`;
};
const centsText = (cents: number) => usdText(centsToNano(cents));

export async function runWatch(deps: WatchDeps): Promise<WatchRun> {
  const run: WatchRun = {
    watched: 0,
    alerts: 0,
    rearmed: 0,
    topUps: 0,
    switchedOff: 0,
    sent: 0,
    deadLettered: 0,
    failures: 0,
  };
  const watches = await deps.watches.listWatches();
  run.watched = watches.length;
  // A few accounts at a time: each is a read and at most two writes.
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
  await sendOutbox(deps, run);
  return run;
}

async function watchOne(deps: WatchDeps, watch: Watch, run: WatchRun): Promise<void> {
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

async function sendOutbox(deps: WatchDeps, run: WatchRun): Promise<void> {
  for (const message of await deps.watches.pendingMessages()) {
    const nowMs = deps.now().getTime();
    const attempt = await deps.watches.claimMessage(message.id, nowMs + SEND_LEASE_MS, nowMs);
    if (attempt === undefined) continue;
    try {
      await deps.mailer.send({
        from: deps.from,
        to: message.to,
        subject: message.subject,
        text: message.text,
      });
    } catch (error) {
      const permanent = deps.mailer.permanent?.(error) === true;
      if (!permanent && attempt < MAX_SEND_ATTEMPTS) {
        // Kept: its lease lapses and a later run sends it.
        run.failures += 1;
        logger.error('balance watch: e-mail not sent', { id: message.id, attempt, error });
        continue;
      }
      await deadLetter(deps, run, message.id, permanent, attempt, error);
      continue;
    }
    await deps.watches.deleteMessage(message.id);
    run.sent += 1;
  }
}

/** An e-mail out of the outbox: counted (alarmed), never a failure of the run: later runs are clean. */
async function deadLetter(
  deps: WatchDeps,
  run: WatchRun,
  id: string,
  permanent: boolean,
  attempt: number,
  error: unknown,
): Promise<void> {
  const said = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  const reason = permanent ? `refused: ${said}` : `${attempt} attempts failed, the last: ${said}`;
  try {
    if (await deps.watches.deadLetter(id, reason, deps.now().toISOString())) run.deadLettered += 1;
    logger.warn('balance watch: e-mail dead-lettered', { id, attempt, permanent, error });
  } catch (failure) {
    // Still in the outbox: the next run tries again (and dead-letters it then).
    run.failures += 1;
    logger.error('balance watch: e-mail could not be dead-lettered', { id, error: failure });
  }
}
