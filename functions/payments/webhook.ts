/**
 * The webhook endpoint: Stripe's signature checked on the raw body as it arrived (a Function URL hands
 * a body it deems binary as base64: the bytes are decoded, never re-serialised), then the event
 * applied (events.ts). Its answers are what Stripe acts on: 2xx is delivered (never sent again), 400 a
 * refusal, 5xx a failure Stripe retries with backoff for up to three days.
 */
import Stripe from 'stripe';
import type { FunctionUrlEvent, FunctionUrlResult } from '../shared/http.js';
import { applyEvent, type PaymentDeps, type PaymentOutcome } from './events.js';
import { recordPayment } from './metrics.js';

/** How old a signature may be, in seconds: Stripe's SDK default, its defence against replays. */
export const SIGNATURE_TOLERANCE_SECONDS = Stripe.webhooks.DEFAULT_TOLERANCE;

export interface WebhookDeps extends PaymentDeps {
  /** The endpoint's signing secret (`whsec_...`). */
  webhookSecret: string;
  /** The secret it replaces, while a rotation is under way: a signature made with it is accepted too. */
  previousWebhookSecret?: string | undefined;
  /** The clock the signature's age is measured on (ms since the epoch). */
  nowMs?: () => number;
  toleranceSeconds?: number;
}

const reply = (statusCode: number, body: unknown): FunctionUrlResult => ({
  statusCode,
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(body),
});

/** The request body's bytes exactly as Stripe sent them. */
function rawBytes(event: FunctionUrlEvent): Buffer {
  const body = event.body ?? '';
  return event.isBase64Encoded ? Buffer.from(body, 'base64') : Buffer.from(body, 'utf8');
}

/**
 * The event, if its signature is valid for the current secret or, during a rotation, the previous
 * one; else the current secret's refusal.
 */
function verified(body: Buffer, signature: string, deps: WebhookDeps): Stripe.Event {
  const check = (secret: string) =>
    Stripe.webhooks.constructEvent(
      body,
      signature,
      secret,
      deps.toleranceSeconds ?? SIGNATURE_TOLERANCE_SECONDS,
      undefined,
      deps.nowMs?.() ?? Date.now(),
    );
  try {
    return check(deps.webhookSecret);
  } catch (error) {
    if (!deps.previousWebhookSecret || !(error instanceof Stripe.errors.StripeSignatureVerificationError))
      throw error;
    try {
      return check(deps.previousWebhookSecret);
    } catch {
      throw error;
    }
  }
}

export async function handleWebhook(event: FunctionUrlEvent, deps: WebhookDeps): Promise<FunctionUrlResult> {
  if (event.requestContext?.http?.method !== 'POST')
    return {
      ...reply(405, { error: 'POST only' }),
      headers: { 'content-type': 'application/json', allow: 'POST' },
    };
  const signature = event.headers?.['stripe-signature'];
  let stripeEvent: Stripe.Event;
  try {
    if (!signature) throw new Error('no Stripe-Signature header');
    stripeEvent = verified(rawBytes(event), signature, deps);
  } catch (error) {
    recordPayment('signatureFailures', 'stripe webhook refused: bad signature', {
      reason: error instanceof Error ? error.message : String(error),
    });
    return reply(400, { error: 'invalid signature' });
  }
  let outcome: PaymentOutcome;
  try {
    outcome = await applyEvent(stripeEvent, deps);
  } catch (error) {
    recordPayment('failures', 'stripe webhook failed', {
      eventId: stripeEvent.id,
      eventType: stripeEvent.type,
      error: error instanceof Error ? error : String(error),
    });
    return reply(500, { error: 'not applied; Stripe will send it again' });
  }
  return reply(200, { received: true, outcome: outcome.kind });
}
