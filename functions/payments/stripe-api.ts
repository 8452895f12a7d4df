/**
 * The few Stripe API calls the payments code makes, behind one narrow port, and their one
 * implementation on the official `stripe` SDK. Locally the SDK reaches the Stripe stand-in
 * (lib/local/stripe.ts) through its own `host`/`port`/`protocol` options; in AWS, api.stripe.com.
 */
import Stripe from 'stripe';
import { type InvoicingApi, stripeInvoicing } from './invoicing.js';

/** What the webhook reads of a PaymentIntent: where its account id is kept (set at Checkout creation). */
export interface PaymentIntentView {
  id: string;
  amount: number;
  currency: string;
  status: string;
  metadata: Record<string, string>;
  /** The customer it belongs to, and its payment method with the card's brand and last 4 digits (expanded). */
  customer?: string;
  paymentMethod?: { id: string; brand?: string; last4?: string };
}

export interface RefundView {
  id: string;
  amount: number;
  currency: string;
  /** `pending`, `requires_action`, `succeeded`, `failed` or `canceled`. */
  status: string | null;
}

export interface CheckoutSessionView {
  id: string;
  /** Where to send the customer: Stripe's hosted payment page. */
  url: string;
}

/** What the success page reads of a Checkout Session: whose it is and the PaymentIntent that pays it. */
export interface CheckoutSessionStatus {
  id: string;
  /** The account it buys for (`client_reference_id`, checkout.ts). */
  accountId?: string;
  /** Its PaymentIntent, once there is one: the top-up's reference (`stripe:<id>`, events.ts). */
  paymentIntent?: string;
  /** Its amount in cents. */
  amountTotal?: number;
}

export interface StripeApi {
  /** A Checkout Session, as the customer returns from it (the success page). */
  retrieveCheckoutSession(id: string): Promise<CheckoutSessionStatus>;
  /** The PaymentIntent, its payment_method expanded (a save-card Checkout records the card from it). */
  retrievePaymentIntent(id: string): Promise<PaymentIntentView>;
  /** Every refund of the charge (all pages). */
  listRefunds(chargeId: string): Promise<RefundView[]>;
  createCheckoutSession(params: Stripe.Checkout.SessionCreateParams): Promise<CheckoutSessionView>;
  /** The billing profile and invoices (invoicing.ts); absent: no invoices (a test's fake Stripe). */
  invoicing?: InvoicingApi;
}

/**
 * The Stripe API version every client of the service asks for, pinned here rather than left to the
 * SDK's default: an SDK upgrade that moves its version fails the type check (the option is typed as
 * the SDK's own version) until this, and the webhook endpoint's version in docs/deploy.md
 * ("Connecting Stripe", which test/unit/payments/api-version.test.ts holds to this string), move too.
 */
export const STRIPE_API_VERSION = '2026-10-28.endive' satisfies Stripe.LatestApiVersion;

/** How long the SDK waits for each attempt of a call, and how many times it tries again. */
export interface StripeNetwork {
  timeoutMs: number;
  maxNetworkRetries: number;
}

/**
 * The default: bounded waits (a webhook answers within Stripe's own delivery timeout) and two network
 * retries (the SDK adds idempotency keys to its retried POSTs). A function with a shorter timeout
 * passes its own (the dashboard's, functions/dashboard/config.ts).
 */
const DEFAULT_NETWORK: StripeNetwork = { timeoutMs: 10_000, maxNetworkRetries: 2 };

/**
 * The longest the SDK pauses before its n-th retry (n from 1): half a second doubled each time, capped
 * at 5 s (its defaults, which stripeClient keeps; its jitter only shortens a pause, never below 0.5 s).
 */
const stripeRetryPauseMs = (n: number) => Math.min(500 * 2 ** (n - 1), 5_000);

/** The longest a call can take on `network`: every attempt timing out, and the pauses between them. */
export function stripeWorstCaseMs({ timeoutMs, maxNetworkRetries }: StripeNetwork): number {
  let total = timeoutMs * (maxNetworkRetries + 1);
  for (let n = 1; n <= maxNetworkRetries; n += 1) total += stripeRetryPauseMs(n);
  return total;
}

/** Where the SDK sends its requests: the stand-in's base URL locally, api.stripe.com when absent. */
export interface StripeClientOptions {
  apiKey: string;
  apiBase?: string | undefined;
  network?: StripeNetwork;
}

/** The SDK client, on the pinned API version, with bounded waits and retries (`network`). */
export function stripeClient({ apiKey, apiBase, network = DEFAULT_NETWORK }: StripeClientOptions): Stripe {
  const base = apiBase ? new URL(apiBase) : undefined;
  return new Stripe(apiKey, {
    apiVersion: STRIPE_API_VERSION,
    maxNetworkRetries: network.maxNetworkRetries,
    timeout: network.timeoutMs,
    telemetry: false,
    ...(base
      ? {
          host: base.hostname,
          port: base.port || (base.protocol === 'https:' ? 443 : 80),
          protocol: base.protocol === 'http:' ? 'http' : 'https',
        }
      : {}),
  });
}

export function stripeApi(client: Stripe): StripeApi {
  return {
    invoicing: stripeInvoicing(client),
    async retrievePaymentIntent(id) {
      const intent = await client.paymentIntents.retrieve(id, { expand: ['payment_method'] });
      const customer = idOf(intent.customer);
      const method = intent.payment_method;
      const card = typeof method === 'object' && method !== null ? method.card : undefined;
      const methodId = idOf(method);
      return {
        id: intent.id,
        amount: intent.amount,
        currency: intent.currency,
        status: intent.status,
        metadata: { ...intent.metadata },
        ...(customer ? { customer } : {}),
        ...(methodId
          ? {
              paymentMethod: {
                id: methodId,
                ...(card?.brand ? { brand: card.brand } : {}),
                ...(card?.last4 ? { last4: card.last4 } : {}),
              },
            }
          : {}),
      };
    },
    async listRefunds(chargeId) {
      const refunds: RefundView[] = [];
      for await (const refund of client.refunds.list({ charge: chargeId, limit: 100 })) {
        refunds.push({
          id: refund.id,
          amount: refund.amount,
          currency: refund.currency,
          status: refund.status,
        });
      }
      return refunds;
    },
    async retrieveCheckoutSession(id) {
      const session = await client.checkout.sessions.retrieve(id);
      const paymentIntent = idOf(session.payment_intent);
      return {
        id: session.id,
        ...(session.client_reference_id ? { accountId: session.client_reference_id } : {}),
        ...(paymentIntent ? { paymentIntent } : {}),
        ...(typeof session.amount_total === 'number' ? { amountTotal: session.amount_total } : {}),
      };
    },
    async createCheckoutSession(params) {
      const session = await client.checkout.sessions.create(params);
      if (!session.url) throw new Error(`Stripe returned checkout session ${session.id} without a url`);
      return { id: session.id, url: session.url };
    },
  };
}

/** An expandable field's id: the id itself, or the expanded object's. */
function idOf(value: unknown): string | undefined {
  if (typeof value === 'string') return value || undefined;
  const id = typeof value === 'object' && value !== null ? (value as { id?: unknown }).id : undefined;
  return typeof id === 'string' && id ? id : undefined;
}

/** One auto top-up's charge of the saved card (functions/balance-watch/watch.ts). */
export interface OffSessionRequest {
  accountId: string;
  seq: number;
  amountCents: number;
  customer: string;
  paymentMethod: string;
}

/**
 * What Stripe answered a confirmed off-session PaymentIntent: created (succeeded, or processing: the
 * webhook says the outcome), or declined: Stripe answers a card that is declined or that needs its
 * holder to authenticate with a 402 `card_error` (code `card_declined`, `authentication_required`...)
 * carrying the PaymentIntent, left in `requires_payment_method`; and a request it refuses for good
 * with a 400, 402 or 404 `invalid_request_error` (or `idempotency_error`): the customer deleted
 * (`resource_missing`, param `customer`), the payment method detached or gone (param
 * `payment_method`). Asking again with the same key gets the same answer, so it is final too, with
 * no PaymentIntent. Anything else throws, and the same call with the same idempotency key is safe to
 * make again: a network failure, 429, 409 (a request with the same key still running), 5xx, 424,
 * and 401 or 403 (the service's own key or its permissions: no customer's doing).
 */
type OffSessionResult =
  | { kind: 'created'; paymentIntent: string; status: string }
  | { kind: 'declined'; code: string; message: string; paymentIntent?: string };

export interface OffSessionPayments {
  createOffSession(request: OffSessionRequest, idempotencyKey: string): Promise<OffSessionResult>;
}

/** The HTTP statuses of an answer that refuses the off-session charge itself, for good. */
const REFUSED_FOR_GOOD = new Set([400, 402, 404]);

/** The off-session charge on the SDK: `confirm: true, off_session: true`, the caller's idempotency key. */
export function offSessionPayments(client: Stripe): OffSessionPayments {
  return {
    async createOffSession(request, idempotencyKey) {
      try {
        const intent = await client.paymentIntents.create(
          {
            amount: request.amountCents,
            currency: 'usd',
            customer: request.customer,
            payment_method: request.paymentMethod,
            off_session: true,
            confirm: true,
            metadata: { accountId: request.accountId, kind: 'auto_top_up', seq: String(request.seq) },
          },
          { idempotencyKey },
        );
        return { kind: 'created', paymentIntent: intent.id, status: intent.status };
      } catch (error) {
        if (error instanceof Stripe.errors.StripeCardError) {
          const paymentIntent = idOf(error.payment_intent);
          return {
            kind: 'declined',
            code: error.code ?? 'card_declined',
            message: error.message,
            ...(paymentIntent ? { paymentIntent } : {}),
          };
        }
        if (error instanceof Stripe.errors.StripeError && REFUSED_FOR_GOOD.has(error.statusCode ?? 0))
          return {
            kind: 'declined',
            code: error.code ?? error.rawType ?? 'invalid_request_error',
            message: error.message,
          };
        throw error;
      }
    },
  };
}
