/**
 * What the payments tests share: a signed webhook request as a Function URL hands it to the function,
 * Stripe-shaped objects, and a Stripe API fake that counts its calls.
 */
import Stripe from 'stripe';
import type { PaymentIntentView, RefundView, StripeApi } from '../../../functions/payments/stripe-api.js';
import type { FunctionUrlEvent } from '../../../functions/shared/http.js';

export const WEBHOOK_SECRET = 'whsec_test_payments_secret';

let counter = 0;
export const id = (prefix: string) => `${prefix}_test${(++counter).toString().padStart(6, '0')}`;

/** A Stripe event of `type` about `object`, as Stripe's JSON. */
export function stripeEvent(type: string, object: Record<string, unknown>) {
  return {
    id: id('evt'),
    object: 'event',
    api_version: Stripe.API_VERSION,
    created: Math.floor(Date.now() / 1000),
    data: { object },
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
  };
}

/** The Function URL event of a POST of `payload`, signed as Stripe signs (or as told). */
export function webhookRequest(
  payload: string,
  options: { secret?: string; timestamp?: number; base64?: boolean; signature?: string | null } = {},
): FunctionUrlEvent {
  const signature =
    options.signature === undefined
      ? Stripe.webhooks.generateTestHeaderString({
          payload,
          secret: options.secret ?? WEBHOOK_SECRET,
          ...(options.timestamp !== undefined ? { timestamp: options.timestamp } : {}),
        })
      : options.signature;
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: '/stripe/webhook',
    rawQueryString: '',
    headers: {
      'content-type': 'application/json; charset=utf-8',
      ...(signature === null ? {} : { 'stripe-signature': signature }),
    },
    requestContext: {
      accountId: 'anonymous',
      apiId: 'local',
      domainName: 'localhost',
      domainPrefix: 'localhost',
      http: {
        method: 'POST',
        path: '/stripe/webhook',
        protocol: 'HTTP/1.1',
        sourceIp: '127.0.0.1',
        userAgent: 'Stripe/1.0',
      },
      requestId: id('req'),
      routeKey: '$default',
      stage: '$default',
      time: new Date().toISOString(),
      timeEpoch: Date.now(),
    },
    body: options.base64 ? Buffer.from(payload, 'utf8').toString('base64') : payload,
    isBase64Encoded: options.base64 ?? false,
  };
}

/** A paid (or unpaid) Checkout Session of `cents` for `accountId`, with its PaymentIntent's id. */
export function checkoutSession(
  accountId: string | null,
  paymentIntent: string,
  cents: number,
  fields: Record<string, unknown> = {},
) {
  return {
    id: id('cs_test'),
    object: 'checkout.session',
    amount_subtotal: cents,
    amount_total: cents,
    client_reference_id: accountId,
    currency: 'usd',
    metadata: accountId ? { accountId } : {},
    mode: 'payment',
    payment_intent: paymentIntent,
    payment_status: 'paid',
    status: 'complete',
    ...fields,
  };
}

export function charge(
  paymentIntent: string,
  cents: number,
  amountRefunded = 0,
  fields: Record<string, unknown> = {},
) {
  return {
    id: id('ch'),
    object: 'charge',
    amount: cents,
    amount_refunded: amountRefunded,
    currency: 'usd',
    metadata: {},
    payment_intent: paymentIntent,
    refunded: amountRefunded === cents,
    ...fields,
  };
}

export function dispute(chargeId: string, paymentIntent: string, cents: number) {
  return {
    id: id('dp'),
    object: 'dispute',
    amount: cents,
    charge: chargeId,
    currency: 'usd',
    payment_intent: paymentIntent,
    reason: 'fraudulent',
    status: 'needs_response',
  };
}

/** Stripe's side as the webhook reads it: PaymentIntents and refunds by charge, and every call made. */
export class FakeStripe implements StripeApi {
  readonly intents = new Map<string, PaymentIntentView>();
  readonly refunds = new Map<string, RefundView[]>();
  readonly calls: string[] = [];

  /** A PaymentIntent of `cents` for `accountId` (its metadata, as createCheckout sets it). */
  intent(accountId: string | undefined, cents: number, currency = 'usd'): string {
    const intentId = id('pi');
    this.intents.set(intentId, {
      id: intentId,
      amount: cents,
      currency,
      status: 'succeeded',
      metadata: accountId ? { accountId } : {},
    });
    return intentId;
  }

  /** A refund of `cents` on the charge, as Stripe lists it. */
  refund(chargeId: string, cents: number, status = 'succeeded'): string {
    const refundId = id('re');
    this.refunds.set(chargeId, [
      { id: refundId, amount: cents, currency: 'usd', status },
      ...(this.refunds.get(chargeId) ?? []),
    ]);
    return refundId;
  }

  async retrieveCheckoutSession(): Promise<never> {
    throw new Error('not used by the webhook');
  }

  async retrievePaymentIntent(intentId: string): Promise<PaymentIntentView> {
    this.calls.push(`retrievePaymentIntent ${intentId}`);
    const intent = this.intents.get(intentId);
    if (!intent) throw new Error(`No such payment_intent: '${intentId}'`);
    return structuredClone(intent);
  }

  async listRefunds(chargeId: string): Promise<RefundView[]> {
    this.calls.push(`listRefunds ${chargeId}`);
    return structuredClone(this.refunds.get(chargeId) ?? []);
  }

  async createCheckoutSession(params: Stripe.Checkout.SessionCreateParams) {
    this.calls.push(`createCheckoutSession ${JSON.stringify(params)}`);
    const sessionId = id('cs_test');
    return { id: sessionId, url: `https://checkout.invalid/${sessionId}` };
  }
}
