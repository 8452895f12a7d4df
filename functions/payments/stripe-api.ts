/**
 * The few Stripe API calls the payments code makes, behind one narrow port, and their one
 * implementation on the official `stripe` SDK. Locally the SDK reaches the Stripe stand-in
 * (lib/local/stripe.ts) through its own `host`/`port`/`protocol` options; in AWS, api.stripe.com.
 */
import Stripe from 'stripe';

/** What the webhook reads of a PaymentIntent: where its account id is kept (set at Checkout creation). */
export interface PaymentIntentView {
  id: string;
  amount: number;
  currency: string;
  status: string;
  metadata: Record<string, string>;
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

export interface StripeApi {
  retrievePaymentIntent(id: string): Promise<PaymentIntentView>;
  /** Every refund of the charge (all pages). */
  listRefunds(chargeId: string): Promise<RefundView[]>;
  createCheckoutSession(params: Stripe.Checkout.SessionCreateParams): Promise<CheckoutSessionView>;
}

/** Where the SDK sends its requests: the stand-in's base URL locally, api.stripe.com when absent. */
export interface StripeClientOptions {
  apiKey: string;
  apiBase?: string | undefined;
}

/**
 * The SDK client: bounded waits (a webhook answers within Stripe's own delivery timeout) and two
 * network retries (the SDK adds idempotency keys to its retried POSTs).
 */
export function stripeClient({ apiKey, apiBase }: StripeClientOptions): Stripe {
  const base = apiBase ? new URL(apiBase) : undefined;
  return new Stripe(apiKey, {
    maxNetworkRetries: 2,
    timeout: 10_000,
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
    async retrievePaymentIntent(id) {
      const intent = await client.paymentIntents.retrieve(id);
      return {
        id: intent.id,
        amount: intent.amount,
        currency: intent.currency,
        status: intent.status,
        metadata: { ...intent.metadata },
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
    async createCheckoutSession(params) {
      const session = await client.checkout.sessions.create(params);
      if (!session.url) throw new Error(`Stripe returned checkout session ${session.id} without a url`);
      return { id: session.id, url: session.url };
    },
  };
}
