/**
 * The balance watch's lookup of an auto top-up whose outcome never arrived: the webhook credits it
 * and clears its in-flight mark on `payment_intent.succeeded`, and switches auto top-up off on
 * `payment_intent.payment_failed`; when that event is lost (the webhook down), the mark would stay and
 * no further top-up would start. So a top-up in flight for LOOK_UP_AFTER_MS with its PaymentIntent
 * recorded is read from Stripe, and its outcome, if it has one, is applied as the event Stripe sends
 * for it, through the webhook's own path (functions/payments/events.ts): succeeded, credited once by
 * the PaymentIntent's id (whichever of the two gets there first) and the mark cleared; declined or
 * canceled, switched off with its reason; still processing, left for a later run.
 */
import type Stripe from 'stripe';
import type { Watch, WatchStore } from '../core/watch.js';
import { applyEvent, type PaymentDeps, type PaymentOutcome } from '../payments/events.js';
import { recordPayment } from '../payments/metrics.js';
import { stripeApi } from '../payments/stripe-api.js';
import { movedSomething } from '../reconciler/reconcile.js';

/** An auto top-up in flight this long (its PaymentIntent known) is looked up at Stripe. */
export const LOOK_UP_AFTER_MS = 5 * 60_000;

interface LookupDeps {
  payments: PaymentDeps;
  /** The PaymentIntent as Stripe's API returns it (the object its events carry). */
  retrieveIntent(id: string): Promise<Record<string, unknown>>;
}

/** The event Stripe sends for the PaymentIntent's outcome as it is now; none while it has none. */
function outcomeType(status: unknown): string | undefined {
  if (status === 'succeeded') return 'payment_intent.succeeded';
  if (status === 'requires_payment_method' || status === 'canceled') return 'payment_intent.payment_failed';
  return undefined;
}

async function lookUpTopUp(
  deps: LookupDeps,
  accountId: string,
  paymentIntent: string,
): Promise<PaymentOutcome | undefined> {
  const intent = await deps.retrieveIntent(paymentIntent);
  const type = outcomeType(intent.status);
  if (!type) return undefined;
  const outcome = await applyEvent(
    { id: `lookup:${paymentIntent}`, type, data: { object: intent } },
    deps.payments,
  );
  if (movedSomething(outcome))
    recordPayment('reconciled', 'auto top-up outcome the webhook missed, applied by the balance watch', {
      accountId,
      paymentIntent,
      eventType: type,
      outcome,
    });
  return outcome;
}

/**
 * The lookup on the SDK, for a watch item the run has just read: the PaymentIntent retrieved, applied
 * with the webhook's dependencies, the watch item (a switch-off's e-mail reads it) as the run read it.
 */
export function sdkLookup(
  client: Stripe,
  payments: Omit<PaymentDeps, 'stripe' | 'watches'> & {
    watches: Pick<WatchStore, 'recordCard' | 'finishTopUp' | 'switchOff'>;
  },
): (watch: Watch) => Promise<PaymentOutcome | undefined> {
  const stripe = stripeApi(client);
  const retrieveIntent = async (id: string) =>
    (await client.paymentIntents.retrieve(id)) as unknown as Record<string, unknown>;
  const { watches } = payments;
  return async (watch) => {
    const paymentIntent = watch.inFlight?.paymentIntent;
    if (!paymentIntent) return undefined;
    const deps: LookupDeps = {
      payments: {
        ...payments,
        stripe,
        watches: {
          recordCard: (...args) => watches.recordCard(...args),
          finishTopUp: (...args) => watches.finishTopUp(...args),
          switchOff: (...args) => watches.switchOff(...args),
          getWatch: async () => watch,
        },
      },
      retrieveIntent,
    };
    return lookUpTopUp(deps, watch.accountId, paymentIntent);
  };
}
