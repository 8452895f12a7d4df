/**
 * What each Stripe event does to the ledger, through the store port (functions/core/store.ts). Every
 * write is once per reference, and each reference is a Stripe id that names one movement of money, so a
 * duplicated, retried or reordered event can never move money twice:
 *
 * | event                                        | effect                                                      |
 * | -------------------------------------------- | ----------------------------------------------------------- |
 * | checkout.session.completed, paid             | top-up `stripe:<payment_intent>` of amount_total            |
 * | checkout.session.completed, unpaid           | nothing yet (an asynchronous method: its outcome follows)   |
 * | checkout.session.async_payment_succeeded     | the same top-up `stripe:<payment_intent>`: credited once    |
 * | checkout.session.async_payment_failed        | nothing                                                     |
 * | charge.refunded                              | one correction `stripe:refund:<refund id>` per refund       |
 * | charge.dispute.created                       | correction `stripe:dispute:<dispute id>`, account suspended |
 * | payment_intent.succeeded, an auto top-up     | top-up `stripe:<payment_intent>` of amount_received, and    |
 * |                                              | the account's in-flight mark cleared (its seq only)         |
 * | payment_intent.payment_failed, auto top-up   | auto top-up switched off with the reason, an e-mail queued  |
 * | any other type                               | nothing                                                     |
 *
 * A paid session of a save-card Checkout (metadata kind `save_card`, checkout.ts) also records its
 * customer and card on the account's watch item (functions/core/watch.ts), from its PaymentIntent
 * read with the payment method expanded. An auto top-up (metadata kind `auto_top_up`, made by the
 * balance watch off-session) has no session: its PaymentIntent events credit it, by the same
 * reference as any purchase, so it is credited once whichever event arrives, in any order, any
 * number of times; the in-flight mark and the switch-off are conditional on its sequence number.
 * Once credited, an auto top-up gets its invoice, paid out of band (invoicing.ts), made once.
 *
 * A refund is taken back by refund id, from the charge's list of refunds, not from the difference
 * of its cumulative `amount_refunded` to what an earlier event said: events may arrive in any order
 * or twice, and a difference taken twice would take back twice. Whatever the order, once any event of
 * the charge is handled after its last refund, exactly `amount_refunded` has been taken back.
 *
 * The account is the one the PaymentIntent names (`metadata.accountId`, set at Checkout creation
 * with the session's `client_reference_id`, checkout.ts): a session whose PaymentIntent names another
 * account credits nothing. Taking back may leave a balance below zero, as the product allows.
 */
import { AccountNotFoundError, type Store } from '../core/store.js';
import type { Audited } from '../core/store-team.js';
import { type AuditAction, auditEntry } from '../core/team.js';
import { AUTO_TOP_UP_KIND, SAVE_CARD_KIND, switchedOffMessage, type WatchStore } from '../core/watch.js';
import { CURRENCY, centsOf, centsToNano } from './amounts.js';
import { recordPayment } from './metrics.js';
import type { PaymentIntentView, StripeApi } from './stripe-api.js';
import {
  asObject,
  idOf,
  type PaymentOutcome,
  type StripeEventView,
  type StripeObject,
  text,
} from './stripe-objects.js';

export type { PaymentOutcome, StripeEventView } from './stripe-objects.js';

/** The metadata key of the PaymentIntent (and of the session) that holds the account id. */
export const ACCOUNT_METADATA_KEY = 'accountId';
/** The metadata key that says what a payment is for: a save-card Checkout, an auto top-up. */
export const KIND_METADATA_KEY = 'kind';

/**
 * The event types applyEvent acts on: the webhook endpoint's subscription (docs/deploy.md) and what
 * the reconciler (functions/reconciler/) asks Stripe for among the events it did not deliver.
 */
export const HANDLED_EVENT_TYPES = [
  'checkout.session.completed',
  'checkout.session.async_payment_succeeded',
  'checkout.session.async_payment_failed',
  'charge.refunded',
  'charge.dispute.created',
  'payment_intent.succeeded',
  'payment_intent.payment_failed',
] as const;

/** References in the ledger: the top-up of a payment, the correction of a refund or a dispute. */
export const paymentReference = (paymentIntentId: string) => `stripe:${paymentIntentId}`;
const refundReference = (refundId: string) => `stripe:refund:${refundId}`;
const disputeReference = (disputeId: string) => `stripe:dispute:${disputeId}`;

export interface PaymentDeps {
  store: Pick<Store, 'topUp' | 'removeCredits' | 'setAccountStatus'>;
  stripe: StripeApi;
  /** ISO time of the ledger entries. */
  now: () => string;
  /** The balance watch's items (absent where no dashboard is deployed: no card is saved there). */
  watches?: Pick<WatchStore, 'recordCard' | 'finishTopUp' | 'switchOff' | 'getWatch'>;
  /** The dashboard's billing page, for the e-mail that says auto top-up was switched off. */
  billingUrl?: string;
  /** Each change written with its audit entry (the webhook, the reconciler, the balance watch's lookup). */
  audited?: boolean;
}

/** Stripe still lists fewer refunds than a charge.refunded event counted: a 500, so Stripe sends it again. */
class RefundsNotListedError extends Error {
  constructor(charge: string, listed: number, refunded: number) {
    super(`charge ${charge}: refunds listed sum to ${listed} cents, the event says ${refunded}`);
    this.name = 'RefundsNotListedError';
  }
}

/** A refund that takes money back (or will): Stripe counts these in `amount_refunded`. */
const REFUND_COUNTS = new Set(['succeeded', 'pending', 'requires_action']);

export async function applyEvent(event: StripeEventView, deps: PaymentDeps): Promise<PaymentOutcome> {
  const object = asObject(event.data.object);
  switch (event.type) {
    case 'checkout.session.completed':
    case 'checkout.session.async_payment_succeeded':
      return creditSession(event, object, deps);
    case 'checkout.session.async_payment_failed':
      return { kind: 'payment-failed', session: idOf(object) ?? '' };
    case 'charge.refunded':
      return takeBackRefunds(event, object, deps);
    case 'charge.dispute.created':
      return takeBackDispute(event, object, deps);
    case 'payment_intent.succeeded':
      return creditAutoTopUp(event, object, deps);
    case 'payment_intent.payment_failed':
      return autoTopUpFailed(object, deps);
    default:
      return { kind: 'ignored', reason: `event type ${event.type} is not handled` };
  }
}

/** An event that moves no money because its account cannot be told (or is not ours): counted, alarmed. */
function notCredited(event: StripeEventView, reason: string, details: StripeObject = {}): PaymentOutcome {
  recordPayment('unknownAccounts', 'stripe event not applied', {
    eventId: event.id,
    eventType: event.type,
    reason,
    ...details,
  });
  return { kind: 'not-credited', reason };
}

/** The account the PaymentIntent names, or why there is none to use. */
async function accountOfIntent(
  deps: PaymentDeps,
  paymentIntentId: string | undefined,
): Promise<{ accountId: string; intent: PaymentIntentView } | { reason: string }> {
  if (!paymentIntentId) return { reason: 'no PaymentIntent' };
  const intent = await deps.stripe.retrievePaymentIntent(paymentIntentId);
  const accountId = text(intent.metadata[ACCOUNT_METADATA_KEY]);
  if (!accountId) return { reason: `PaymentIntent ${paymentIntentId} names no account` };
  return { accountId, intent };
}

/** Runs a store write for an account; an account the store does not have is an outcome, not an error. */
async function forAccount<T>(write: () => Promise<T>): Promise<T | AccountNotFoundError> {
  try {
    return await write();
  } catch (error) {
    if (error instanceof AccountNotFoundError) return error;
    throw error;
  }
}

async function creditSession(
  event: StripeEventView,
  session: StripeObject,
  deps: PaymentDeps,
): Promise<PaymentOutcome> {
  const sessionId = idOf(session) ?? '';
  if (session.mode !== 'payment') return { kind: 'ignored', reason: `session mode ${String(session.mode)}` };
  if (session.payment_status !== 'paid') {
    if (event.type === 'checkout.session.completed' && session.payment_status === 'unpaid')
      return { kind: 'awaiting-payment', session: sessionId };
    return { kind: 'ignored', reason: `payment_status ${String(session.payment_status)}` };
  }
  const details = { sessionId, accountId: session.client_reference_id, currency: session.currency };
  if (session.currency !== CURRENCY) return notCredited(event, 'currency is not USD', details);
  const cents = centsOf(session.amount_total);
  if (!cents) return { kind: 'ignored', reason: 'nothing paid' };
  const accountId = text(session.client_reference_id);
  if (!accountId) return notCredited(event, 'session has no client_reference_id', details);
  const paymentIntent = idOf(session.payment_intent);
  const owner = await accountOfIntent(deps, paymentIntent);
  if ('reason' in owner) return notCredited(event, owner.reason, details);
  if (owner.accountId !== accountId)
    return notCredited(event, 'the PaymentIntent names another account than the session', {
      ...details,
      intentAccountId: owner.accountId,
    });
  if (owner.intent.currency !== CURRENCY || owner.intent.amount !== cents)
    return notCredited(event, 'the PaymentIntent does not match the session amount', {
      ...details,
      intentAmount: owner.intent.amount,
    });
  const intentId = paymentIntent as string;
  const now = deps.now();
  const written = await forAccount(() =>
    deps.store.topUp(
      accountId,
      paymentReference(intentId),
      centsToNano(cents),
      now,
      byStripe(deps, accountId, 'purchase', intentId, cents, now),
    ),
  );
  if (written instanceof AccountNotFoundError) return notCredited(event, 'no such account', details);
  if (written)
    recordPayment('credited', 'stripe payment credited', { ...details, paymentIntent: intentId, cents });
  if (asObject(session.metadata)[KIND_METADATA_KEY] === SAVE_CARD_KIND)
    await recordSavedCard(accountId, session, owner.intent, deps);
  return { kind: written ? 'credited' : 'already-credited', accountId, paymentIntent: intentId, cents };
}

/**
 * The audit entry of a change Stripe made (a purchase, a refund, a dispute), by the webhook or the
 * reconciler alike, written with the change: its reference and amount, no secret.
 */
function byStripe(
  deps: PaymentDeps,
  accountId: string,
  action: AuditAction,
  target: string,
  cents: number,
  now: string,
  more: Record<string, string> = {},
): Audited {
  if (!deps.audited) return {};
  const details = { amount: `$${Math.trunc(cents / 100)}.${String(cents % 100).padStart(2, '0')}`, ...more };
  return { audit: auditEntry(accountId, { kind: 'stripe' }, action, now, { target, details }) };
}

/** The card a save-card Checkout saved (every delivery records it again: a set of the same values). */
async function recordSavedCard(
  accountId: string,
  session: StripeObject,
  intent: PaymentIntentView,
  deps: PaymentDeps,
): Promise<void> {
  const customer = idOf(session.customer) ?? intent.customer;
  const method = intent.paymentMethod;
  if (!deps.watches || !customer || !method) return;
  await deps.watches.recordCard(
    accountId,
    {
      customer,
      paymentMethod: method.id,
      ...(method.brand ? { brand: method.brand } : {}),
      ...(method.last4 ? { last4: method.last4 } : {}),
      from: typeof session.created === 'number' ? session.created : 0,
    },
    deps.now(),
  );
}

/** An auto top-up's account and sequence number, from its PaymentIntent's metadata (set by the watch). */
function autoTopUpOf(intent: StripeObject): { accountId: string; seq: number } | undefined {
  const metadata = asObject(intent.metadata);
  if (metadata[KIND_METADATA_KEY] !== AUTO_TOP_UP_KIND) return undefined;
  const accountId = text(metadata[ACCOUNT_METADATA_KEY]);
  const seq = Number(metadata.seq);
  if (!accountId || !Number.isSafeInteger(seq) || seq < 1) return undefined;
  return { accountId, seq };
}

async function creditAutoTopUp(
  event: StripeEventView,
  intent: StripeObject,
  deps: PaymentDeps,
): Promise<PaymentOutcome> {
  const topUp = autoTopUpOf(intent);
  // A Checkout purchase's PaymentIntent: its session's events credit it (the same reference).
  if (!topUp) return { kind: 'ignored', reason: 'not an auto top-up' };
  const intentId = idOf(intent) ?? '';
  const details = { paymentIntent: intentId, accountId: topUp.accountId, currency: intent.currency };
  if (intent.currency !== CURRENCY) return notCredited(event, 'currency is not USD', details);
  const cents = centsOf(intent.amount_received);
  if (!cents) return { kind: 'ignored', reason: 'nothing received' };
  const now = deps.now();
  const audit = byStripe(deps, topUp.accountId, 'purchase', intentId, cents, now, { kind: 'auto top-up' });
  const written = await forAccount(() =>
    deps.store.topUp(topUp.accountId, paymentReference(intentId), centsToNano(cents), now, audit),
  );
  if (written instanceof AccountNotFoundError) return notCredited(event, 'no such account', details);
  if (written) recordPayment('credited', 'stripe auto top-up credited', { ...details, cents });
  // Cleared after the credit, and only for this top-up: a later one in flight is left alone.
  await deps.watches?.finishTopUp(topUp.accountId, topUp.seq);
  // Its invoice, made once (invoicing.ts); a failure throws, and the event comes again to make it.
  const customer = idOf(intent.customer);
  if (deps.stripe.invoicing && customer)
    await deps.stripe.invoicing.invoicePayment({
      customer,
      accountId: topUp.accountId,
      paymentIntent: intentId,
      amountCents: cents,
      description: 'API credits (auto top-up)',
    });
  return {
    kind: written ? 'credited' : 'already-credited',
    accountId: topUp.accountId,
    paymentIntent: intentId,
    cents,
  };
}

async function autoTopUpFailed(intent: StripeObject, deps: PaymentDeps): Promise<PaymentOutcome> {
  const topUp = autoTopUpOf(intent);
  if (!topUp || !deps.watches) return { kind: 'ignored', reason: 'not an auto top-up' };
  const error = asObject(intent.last_payment_error);
  const reason = `${text(error.code) ?? 'payment_failed'}: ${text(error.message) ?? 'the payment failed'}`;
  const watch = await deps.watches.getWatch(topUp.accountId);
  const switched = await deps.watches.switchOff(
    topUp.accountId,
    topUp.seq,
    reason,
    switchedOffMessage(
      watch ?? { accountId: topUp.accountId },
      centsOf(intent.amount) ?? 0,
      reason,
      deps.billingUrl,
    ),
    deps.now(),
  );
  return { kind: 'auto-top-up-off', accountId: topUp.accountId, switched };
}

async function takeBackRefunds(
  event: StripeEventView,
  charge: StripeObject,
  deps: PaymentDeps,
): Promise<PaymentOutcome> {
  const chargeId = idOf(charge);
  if (!chargeId) return { kind: 'ignored', reason: 'charge without an id' };
  const details = { chargeId, currency: charge.currency };
  if (charge.currency !== CURRENCY) return notCredited(event, 'currency is not USD', details);
  const owner = await accountOfIntent(deps, idOf(charge.payment_intent));
  if ('reason' in owner) return notCredited(event, owner.reason, details);
  const { accountId } = owner;
  const refunds = await deps.stripe.listRefunds(chargeId);
  const applied: string[] = [];
  let cents = 0;
  for (const refund of refunds) {
    if (!REFUND_COUNTS.has(refund.status ?? '') || refund.currency !== CURRENCY) continue;
    const amount = centsOf(refund.amount);
    if (!amount) continue;
    const now = deps.now();
    const outcome = await forAccount(() =>
      deps.store.removeCredits(accountId, refundReference(refund.id), centsToNano(amount), now, {
        force: true,
        ...byStripe(deps, accountId, 'refund', refund.id, amount, now),
      }),
    );
    if (outcome instanceof AccountNotFoundError)
      return notCredited(event, 'no such account', { ...details, accountId });
    if (outcome === 'applied') {
      applied.push(refund.id);
      cents += amount;
    }
  }
  // The list is read after the event was sent: it has at least the refunds the event counted.
  const listed = refunds.reduce((sum, refund) => sum + (centsOf(refund.amount) ?? 0), 0);
  const refunded = centsOf(charge.amount_refunded) ?? 0;
  if (listed < refunded) throw new RefundsNotListedError(chargeId, listed, refunded);
  return { kind: 'refunds', accountId, charge: chargeId, applied, cents };
}

async function takeBackDispute(
  event: StripeEventView,
  dispute: StripeObject,
  deps: PaymentDeps,
): Promise<PaymentOutcome> {
  const disputeId = idOf(dispute);
  if (!disputeId) return { kind: 'ignored', reason: 'dispute without an id' };
  const details = { disputeId, chargeId: idOf(dispute.charge), currency: dispute.currency };
  if (dispute.currency !== CURRENCY) return notCredited(event, 'currency is not USD', details);
  const cents = centsOf(dispute.amount);
  if (cents === undefined) return notCredited(event, 'dispute without an amount', details);
  const owner = await accountOfIntent(deps, idOf(dispute.payment_intent));
  if ('reason' in owner) return notCredited(event, owner.reason, details);
  const { accountId } = owner;
  const now = deps.now();
  const outcome = await forAccount(() =>
    deps.store.removeCredits(accountId, disputeReference(disputeId), centsToNano(cents), now, {
      force: true,
      ...byStripe(deps, accountId, 'dispute', disputeId, cents, now),
    }),
  );
  if (outcome instanceof AccountNotFoundError)
    return notCredited(event, 'no such account', { ...details, accountId });
  // Suspended once per dispute, on whichever delivery gets there first (a retry after a write that
  // failed between the two still suspends), only an active account (a ban stays, however the two
  // race), and not again on a retry after an operator reinstated the account: one conditional write.
  await deps.store.setAccountStatus(accountId, 'suspended', deps.now(), {
    cause: disputeReference(disputeId),
  });
  if (outcome === 'applied')
    recordPayment('disputes', 'stripe dispute: credit taken back, account suspended', {
      ...details,
      accountId,
      cents,
    });
  return { kind: 'disputed', accountId, dispute: disputeId, applied: outcome === 'applied' };
}
