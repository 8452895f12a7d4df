/**
 * The auto top-up's off-session charge (functions/payments/stripe-api.ts) on each kind of Stripe
 * answer: a card error, and a request Stripe refuses for good (400, 402 or 404: the customer deleted,
 * the payment method detached), are final, the reason kept; a network failure, 429, 409, 5xx, and
 * the service's own key refused (401, 403) throw, to be asked again with the same idempotency key.
 */
import Stripe from 'stripe';
import { describe, expect, it } from 'vitest';
import { offSessionPayments } from '../../../functions/payments/stripe-api.js';

const REQUEST = { accountId: 'acct', seq: 1, amountCents: 2_000, customer: 'cus_1', paymentMethod: 'pm_1' };

function failingWith(error: Error) {
  const client = {
    paymentIntents: {
      create: async () => {
        throw error;
      },
    },
  } as unknown as Stripe;
  return offSessionPayments(client).createOffSession(REQUEST, 'auto-top-up:acct:1');
}

describe('an off-session charge Stripe refuses', () => {
  it.each([
    [
      'the customer deleted',
      new Stripe.errors.StripeInvalidRequestError({
        type: 'invalid_request_error',
        code: 'resource_missing',
        param: 'customer',
        message: "No such customer: 'cus_1'",
        statusCode: 400,
      }),
      'resource_missing',
    ],
    [
      'the payment method detached',
      new Stripe.errors.StripeInvalidRequestError({
        type: 'invalid_request_error',
        param: 'payment_method',
        message:
          'The provided PaymentMethod was previously used with a PaymentIntent without Customer attachment, shared with a connected account without Customer attachment, or was detached from a Customer. It may not be used again.',
        statusCode: 400,
      }),
      'invalid_request_error',
    ],
    [
      'the payment method in an unexpected state',
      new Stripe.errors.StripeInvalidRequestError({
        type: 'invalid_request_error',
        code: 'payment_method_unexpected_state',
        message: 'The PaymentMethod cannot be used in its current state.',
        statusCode: 400,
      }),
      'payment_method_unexpected_state',
    ],
    [
      'a 404',
      new Stripe.errors.StripeInvalidRequestError({
        type: 'invalid_request_error',
        code: 'resource_missing',
        message: 'No such payment_method',
        statusCode: 404,
      }),
      'resource_missing',
    ],
    [
      'the same key with other parameters',
      new Stripe.errors.StripeIdempotencyError({
        type: 'idempotency_error',
        message:
          'Keys for idempotent requests can only be used with the same parameters they were first used with.',
        statusCode: 400,
      }),
      'idempotency_error',
    ],
  ])('%s: final, with its code and message', async (_what, error, code) => {
    await expect(failingWith(error)).resolves.toEqual({ kind: 'declined', code, message: error.message });
  });

  it.each([
    ['a network failure', new Stripe.errors.StripeConnectionError({ message: 'socket hang up' })],
    ['429', new Stripe.errors.StripeRateLimitError({ message: 'Too many requests', statusCode: 429 })],
    ['500', new Stripe.errors.StripeAPIError({ type: 'api_error', message: 'oops', statusCode: 500 })],
    [
      '409 (a request with the same key still running)',
      new Stripe.errors.StripeIdempotencyError({
        type: 'idempotency_error',
        code: 'idempotency_key_in_use',
        message: 'in use',
        statusCode: 409,
      }),
    ],
    [
      '401 (our key)',
      new Stripe.errors.StripeAuthenticationError({ message: 'Invalid API Key', statusCode: 401 }),
    ],
    [
      '403 (our key)',
      new Stripe.errors.StripePermissionError({ message: 'restricted key', statusCode: 403 }),
    ],
  ])('%s: thrown, to be asked again with the same key', async (_what, error) => {
    await expect(failingWith(error)).rejects.toBe(error);
  });

  it('a card error stays a decline with its PaymentIntent', async () => {
    const error = new Stripe.errors.StripeCardError({
      type: 'card_error',
      code: 'card_declined',
      message: 'Your card was declined.',
      statusCode: 402,
      payment_intent: { id: 'pi_1' } as Stripe.PaymentIntent,
    });
    await expect(failingWith(error)).resolves.toEqual({
      kind: 'declined',
      code: 'card_declined',
      message: 'Your card was declined.',
      paymentIntent: 'pi_1',
    });
  });
});
