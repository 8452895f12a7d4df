/**
 * A purchase of credits: a Stripe Checkout Session in `payment` mode for a whole number of cents
 * within the bounds (amounts.ts), checked before any call to Stripe. The account id goes in the
 * session's `client_reference_id` and in its PaymentIntent's metadata, which is where the webhook
 * reads it back (events.ts): the charge, refund and dispute events carry the PaymentIntent, not the
 * session. Nothing is credited here or on the success page: only the webhook credits.
 *
 * Each purchase is invoiced by Checkout itself (`invoice_creation`): the session is made for the
 * account's Customer (account-customer.ts: the one the dashboard remembered, else the one its card
 * was saved to, else found by its metadata, else made; remembered then), so that the invoice carries
 * the billing profile kept on it, with its PO number as the invoice's custom field, and the Invoices
 * page finds that Customer at once. Without the invoicing port (a test's fake Stripe) a session is
 * as before.
 */

import type Stripe from 'stripe';
import { SAVE_CARD_KIND } from '../core/watch.js';
import { ensureAccountCustomer, type RememberedCustomers } from './account-customer.js';
import { CURRENCY, purchaseCents } from './amounts.js';
import { ACCOUNT_METADATA_KEY, KIND_METADATA_KEY } from './events.js';
import { poFields } from './invoicing.js';
import type { CheckoutSessionView, StripeApi } from './stripe-api.js';

export interface CheckoutRequest {
  accountId: string;
  /** Cents, as the customer chose them (a fixed amount, or the custom one as typed). */
  amountCents: unknown;
  /** Where Stripe sends the customer after paying; `{CHECKOUT_SESSION_ID}` is replaced by Stripe. */
  successUrl: string;
  cancelUrl: string;
  /** The account's Stripe Customer, from the card it saved before (functions/core/watch.ts), if any. */
  customer?: string | undefined;
  /** Where the dashboard remembers the account's Customer (account-customer.ts); absent: Stripe alone. */
  remembered?: RememberedCustomers | undefined;
}

/** The session's Customer and its invoice, where the invoicing port is there. */
async function invoiced(
  stripe: StripeApi,
  request: CheckoutRequest,
  description: string,
): Promise<
  { customer: string; invoice_creation: Stripe.Checkout.SessionCreateParams.InvoiceCreation } | undefined
> {
  if (!stripe.invoicing) return undefined;
  const customer = await ensureAccountCustomer(stripe.invoicing, {
    accountId: request.accountId,
    saved: request.customer,
    remembered: request.remembered,
  });
  const fields = poFields((await stripe.invoicing.readProfile(customer)) ?? {});
  return {
    customer,
    invoice_creation: {
      enabled: true,
      invoice_data: {
        description,
        metadata: { [ACCOUNT_METADATA_KEY]: request.accountId },
        ...(fields.length > 0 ? { custom_fields: fields } : {}),
      },
    },
  };
}

/** Throws InvalidPurchaseAmountError (a message for the customer) before any Stripe call. */
export async function createCheckout(
  stripe: StripeApi,
  request: CheckoutRequest,
): Promise<CheckoutSessionView> {
  const cents = purchaseCents(request.amountCents);
  if (!request.accountId) throw new Error('createCheckout needs the account id');
  const metadata = { [ACCOUNT_METADATA_KEY]: request.accountId };
  return stripe.createCheckoutSession({
    mode: 'payment',
    client_reference_id: request.accountId,
    ...(await invoiced(stripe, request, 'API credits')),
    line_items: [
      {
        quantity: 1,
        price_data: { currency: CURRENCY, unit_amount: cents, product_data: { name: 'API credits' } },
      },
    ],
    metadata,
    payment_intent_data: { metadata },
    success_url: request.successUrl,
    cancel_url: request.cancelUrl,
  });
}

/**
 * A purchase that also saves the card for auto top-up: the same Checkout in `payment` mode (the
 * customer buys the top-up amount now, within the same bounds), with
 * `payment_intent_data.setup_future_usage = off_session` (Checkout says the card is kept for later
 * payments and attaches it to the customer). The Customer to charge later is the account's own when
 * it has one (`customer`: one Customer per account, however many cards it saves), else a new one
 * (`customer_creation: always`); Stripe takes one or the other, never both. A Customer that Stripe no
 * longer knows (deleted in its dashboard: 400 `resource_missing` on `customer`) gets a new one. With
 * the invoicing port, the Customer is always the account's own (found or made before the session).
 * Its metadata's `kind` tells the webhook to record the card (events.ts).
 */
export async function createSaveCardCheckout(
  stripe: StripeApi,
  request: CheckoutRequest,
): Promise<CheckoutSessionView> {
  const cents = purchaseCents(request.amountCents);
  if (!request.accountId) throw new Error('createSaveCardCheckout needs the account id');
  const invoice = await invoiced(stripe, request, 'API credits (card saved for auto top-up)');
  if (invoice) return stripe.createCheckoutSession(saveCardParams(request, cents, invoice));
  if (request.customer) {
    try {
      return await stripe.createCheckoutSession(
        saveCardParams(request, cents, { customer: request.customer }),
      );
    } catch (error) {
      if (!isMissingCustomer(error)) throw error;
    }
  }
  return stripe.createCheckoutSession(saveCardParams(request, cents, { customer_creation: 'always' }));
}

/** Stripe's answer to a `customer` it does not know: 400 `resource_missing` naming the `customer` param. */
function isMissingCustomer(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, param } = error as { code?: unknown; param?: unknown };
  return code === 'resource_missing' && param === 'customer';
}

function saveCardParams(
  request: CheckoutRequest,
  cents: number,
  who:
    | { customer: string; invoice_creation?: Stripe.Checkout.SessionCreateParams.InvoiceCreation }
    | { customer_creation: 'always' },
): Stripe.Checkout.SessionCreateParams {
  const metadata = { [ACCOUNT_METADATA_KEY]: request.accountId, [KIND_METADATA_KEY]: SAVE_CARD_KIND };
  return {
    mode: 'payment',
    client_reference_id: request.accountId,
    ...who,
    line_items: [
      {
        quantity: 1,
        price_data: {
          currency: CURRENCY,
          unit_amount: cents,
          product_data: { name: 'API credits (card saved for auto top-up)' },
        },
      },
    ],
    metadata,
    payment_intent_data: { metadata, setup_future_usage: 'off_session' },
    success_url: request.successUrl,
    cancel_url: request.cancelUrl,
  };
}
