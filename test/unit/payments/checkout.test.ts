/**
 * Buying credits (functions/payments/checkout.ts, amounts.ts): a custom amount is whole cents within
 * the bounds, checked before any Stripe call; the session is created in payment mode with the account
 * in client_reference_id and in its PaymentIntent's metadata; cents convert to nano-USD exactly.
 */
import { describe, expect, it } from 'vitest';
import {
  centsToNano,
  InvalidPurchaseAmountError,
  MAX_PURCHASE_CENTS,
  MIN_PURCHASE_CENTS,
  purchaseCents,
  purchaseCentsFromDollars,
} from '../../../functions/payments/amounts.js';
import { createCheckout } from '../../../functions/payments/checkout.js';
import { FakeStripe } from './support.js';

const request = (amountCents: unknown) => ({
  accountId: 'acct-a',
  amountCents,
  successUrl: 'https://example.test/billing?paid={CHECKOUT_SESSION_ID}',
  cancelUrl: 'https://example.test/billing',
});

describe('createCheckout', () => {
  it.each([
    0,
    -5,
    4.999,
    1e9,
    'abc',
    '',
    '12.5',
    Number.NaN,
    Infinity,
    null,
    undefined,
    '1e3',
    [1000],
    499,
    100_001,
  ])('refuses %j with a clear message and no Stripe call', async (amount) => {
    const stripe = new FakeStripe();
    const attempt = createCheckout(stripe, request(amount));
    await expect(attempt).rejects.toBeInstanceOf(InvalidPurchaseAmountError);
    await expect(attempt).rejects.toThrow(/^The amount must be .*\$5\.00 to \$1,000\.00/);
    expect(stripe.calls).toEqual([]);
  });

  it('creates a payment-mode session naming the account twice: client_reference_id and the PaymentIntent metadata', async () => {
    const stripe = new FakeStripe();
    const session = await createCheckout(stripe, request(2_500));
    expect(session.url).toMatch(/^https:/);
    expect(stripe.calls).toHaveLength(1);
    const params = JSON.parse(String(stripe.calls[0]).replace(/^createCheckoutSession /, ''));
    expect(params).toMatchObject({
      mode: 'payment',
      client_reference_id: 'acct-a',
      payment_intent_data: { metadata: { accountId: 'acct-a' } },
      line_items: [{ quantity: 1, price_data: { currency: 'usd', unit_amount: 2_500 } }],
      success_url: request(0).successUrl,
      cancel_url: request(0).cancelUrl,
    });
  });

  it('accepts the bounds themselves, and a whole number typed as text', async () => {
    expect(purchaseCents(MIN_PURCHASE_CENTS)).toBe(500);
    expect(purchaseCents(MAX_PURCHASE_CENTS)).toBe(100_000);
    expect(purchaseCents(' 1500 ')).toBe(1_500);
  });
});

describe('amounts typed in dollars', () => {
  it('reads whole cents exactly and refuses sub-cent or out-of-bounds amounts', () => {
    expect(purchaseCentsFromDollars('25')).toBe(2_500);
    expect(purchaseCentsFromDollars('12.34')).toBe(1_234);
    for (const typed of ['4.999', '0', '-5', '1e9', 'abc', '4.99', '1000.01'])
      expect(() => purchaseCentsFromDollars(typed)).toThrow(InvalidPurchaseAmountError);
  });
});

describe('centsToNano', () => {
  it('is exact: a cent is 10^7 nano-USD', () => {
    expect(centsToNano(1)).toBe(10_000_000n);
    expect(centsToNano(100_000)).toBe(1_000_000_000_000n);
    expect(centsToNano(Number.MAX_SAFE_INTEGER)).toBe(BigInt(Number.MAX_SAFE_INTEGER) * 10_000_000n);
    expect(() => centsToNano(0.5)).toThrow(RangeError);
    expect(() => centsToNano(-1)).toThrow(RangeError);
  });
});
