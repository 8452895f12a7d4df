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
 * | any other type                               | nothing                                                     |
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
import { CURRENCY, centsOf, centsToNano } from './amounts.js';
import { recordPayment } from './metrics.js';
import type { StripeApi } from './stripe-api.js';

/** The metadata key of the PaymentIntent (and of the session) that holds the account id. */
export const ACCOUNT_METADATA_KEY = 'accountId';

/** References in the ledger: the top-up of a payment, the correction of a refund or a dispute. */
const paymentReference = (paymentIntentId: string) => `stripe:${paymentIntentId}`;
const refundReference = (refundId: string) => `stripe:refund:${refundId}`;
const disputeReference = (disputeId: string) => `stripe:dispute:${disputeId}`;

export interface PaymentDeps {
  store: Pick<Store, 'topUp' | 'removeCredits' | 'setAccountStatus' | 'getAccount'>;
  stripe: StripeApi;
  /** ISO time of the ledger entries. */
  now: () => string;
}

/** The signed event, as far as this code reads it. */
export interface StripeEventView {
  id: string;
  type: string;
  data: { object: unknown };
}

export type PaymentOutcome =
  | { kind: 'credited' | 'already-credited'; accountId: string; paymentIntent: string; cents: number }
  | { kind: 'awaiting-payment' | 'payment-failed'; session: string }
  | { kind: 'refunds'; accountId: string; charge: string; applied: string[]; cents: number }
  | { kind: 'disputed'; accountId: string; dispute: string; applied: boolean }
  | { kind: 'not-credited'; reason: string }
  | { kind: 'ignored'; reason: string };

/** Stripe still lists fewer refunds than a charge.refunded event counted: a 500, so Stripe sends it again. */
class RefundsNotListedError extends Error {
  constructor(charge: string, listed: number, refunded: number) {
    super(`charge ${charge}: refunds listed sum to ${listed} cents, the event says ${refunded}`);
    this.name = 'RefundsNotListedError';
  }
}

type StripeObject = Record<string, unknown>;

const asObject = (value: unknown): StripeObject =>
  typeof value === 'object' && value !== null ? (value as StripeObject) : {};
const text = (value: unknown): string | undefined =>
  typeof value === 'string' && value !== '' ? value : undefined;
/** An expandable field: the id, or the expanded object's id. */
const idOf = (value: unknown): string | undefined => text(value) ?? text(asObject(value).id);

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
): Promise<{ accountId: string; intent: { amount: number; currency: string } } | { reason: string }> {
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
  const written = await forAccount(() =>
    deps.store.topUp(accountId, paymentReference(intentId), centsToNano(cents), deps.now()),
  );
  if (written instanceof AccountNotFoundError) return notCredited(event, 'no such account', details);
  if (written)
    recordPayment('credited', 'stripe payment credited', { ...details, paymentIntent: intentId, cents });
  return { kind: written ? 'credited' : 'already-credited', accountId, paymentIntent: intentId, cents };
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
    const outcome = await forAccount(() =>
      deps.store.removeCredits(accountId, refundReference(refund.id), centsToNano(amount), deps.now(), {
        force: true,
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
  const outcome = await forAccount(() =>
    deps.store.removeCredits(accountId, disputeReference(disputeId), centsToNano(cents), deps.now(), {
      force: true,
    }),
  );
  if (outcome instanceof AccountNotFoundError)
    return notCredited(event, 'no such account', { ...details, accountId });
  // Suspended on every delivery, not only the first: a retry after a write that failed between the
  // two still suspends the account. A banned account stays banned (a suspension would lift the ban).
  if ((await deps.store.getAccount(accountId))?.status !== 'banned')
    await deps.store.setAccountStatus(accountId, 'suspended', deps.now());
  if (outcome === 'applied')
    recordPayment('disputes', 'stripe dispute: credit taken back, account suspended', {
      ...details,
      accountId,
      cents,
    });
  return { kind: 'disputed', accountId, dispute: disputeId, applied: outcome === 'applied' };
}
