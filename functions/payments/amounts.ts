/**
 * Stripe's amounts and ours. Stripe states a USD amount as an integer number of cents (`amount`,
 * `amount_total`, `amount_refunded`); the ledger keeps nano-USD (functions/core/money.ts). A cent
 * is exactly 10^7 nano-USD, so the conversion never rounds. Only USD is credited: an amount in any
 * other currency is not converted at all.
 */
import { parseDecimal, usdToNano } from '../core/money.js';

/** The one currency the ledger is kept in, as Stripe spells it. */
export const CURRENCY = 'usd';

const NANO_PER_CENT = usdToNano('0.01');

/** The bounds of one purchase of credits through Checkout, in cents: $5.00 to $1,000.00. */
export const MIN_PURCHASE_CENTS = 500;
export const MAX_PURCHASE_CENTS = 100_000;

/** An amount in cents as Stripe gives it: a whole, non-negative, safe integer, else undefined. */
export function centsOf(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

/** Whole cents to nano-USD, exactly. */
export function centsToNano(cents: number): bigint {
  if (!Number.isSafeInteger(cents) || cents < 0)
    throw new RangeError(`not a whole number of cents: ${cents}`);
  return BigInt(cents) * NANO_PER_CENT;
}

/** `$12.34` for a message. */
const formatCents = (cents: number) =>
  `$${Math.floor(cents / 100).toLocaleString('en-US')}.${String(cents % 100).padStart(2, '0')}`;

export class InvalidPurchaseAmountError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidPurchaseAmountError';
  }
}

/**
 * A purchase amount as a customer may type it, in cents: a whole number (a number or a string of
 * digits) from MIN_PURCHASE_CENTS to MAX_PURCHASE_CENTS. Anything else throws with a message fit to
 * show the customer: 0, -5, 4.999, 1e9 and "abc" are all refused before anything reaches Stripe.
 */
export function purchaseCents(input: unknown): number {
  const bounds = `from ${formatCents(MIN_PURCHASE_CENTS)} to ${formatCents(MAX_PURCHASE_CENTS)}`;
  const value = typeof input === 'string' && /^\s*\d{1,12}\s*$/.test(input) ? Number(input) : input;
  if (typeof value !== 'number' || !Number.isFinite(value))
    throw new InvalidPurchaseAmountError(`The amount must be a number of cents ${bounds}.`);
  if (!Number.isSafeInteger(value))
    throw new InvalidPurchaseAmountError(`The amount must be a whole number of cents, ${bounds}.`);
  if (value < MIN_PURCHASE_CENTS || value > MAX_PURCHASE_CENTS)
    throw new InvalidPurchaseAmountError(`The amount must be ${bounds}.`);
  return value;
}

/**
 * A purchase amount typed in dollars (`"25"`, `"12.50"`), in cents: exact to the cent (`"4.999"` is
 * refused, never rounded), then held to the same bounds as purchaseCents.
 */
export function purchaseCentsFromDollars(input: string): number {
  let cents: bigint;
  try {
    cents = parseDecimal(input, 2);
  } catch {
    throw new InvalidPurchaseAmountError(
      `The amount must be in dollars and whole cents, from ${formatCents(MIN_PURCHASE_CENTS)} to ${formatCents(MAX_PURCHASE_CENTS)}.`,
    );
  }
  return purchaseCents(
    cents >= -1_000_000_000_000n && cents <= 1_000_000_000_000n ? Number(cents) : Infinity,
  );
}

/** The bounds of an auto top-up, in cents: "when below X" from $1 to $1,000, "buy Y" from $5 to $1,000. */
const AUTO_TOP_UP_BELOW_CENTS = { min: 100, max: 100_000 } as const;
const AUTO_TOP_UP_BUY_CENTS = { min: MIN_PURCHASE_CENTS, max: MAX_PURCHASE_CENTS } as const;
/** The bounds of a low-balance alert's threshold, in cents: $1 to $10,000. */
const ALERT_THRESHOLD_CENTS = { min: 100, max: 1_000_000 } as const;
/** A key's daily spend cap as the dashboard takes it: $0.01 to $10,000, whole cents. */
const KEY_CAP_CENTS = { min: 1, max: 1_000_000 } as const;

/** Dollars as typed (`"12.50"`) to cents, exact (never rounded), within `bounds`; else a message for the customer. */
function dollarsWithin(input: string, bounds: { min: number; max: number }, what: string): number {
  const range = `from ${formatCents(bounds.min)} to ${formatCents(bounds.max)}`;
  let cents: bigint;
  try {
    cents = parseDecimal(input.trim(), 2);
  } catch {
    throw new InvalidPurchaseAmountError(`${what} must be in dollars and whole cents, ${range}.`);
  }
  if (cents < BigInt(bounds.min) || cents > BigInt(bounds.max))
    throw new InvalidPurchaseAmountError(`${what} must be ${range}.`);
  return Number(cents);
}

/** "When below $X, buy $Y" as typed, in cents, each within its bounds (checked on the server). */
export function autoTopUpCents(below: string, buy: string): { belowCents: number; buyCents: number } {
  return {
    belowCents: dollarsWithin(below, AUTO_TOP_UP_BELOW_CENTS, 'The balance to top up below'),
    buyCents: dollarsWithin(buy, AUTO_TOP_UP_BUY_CENTS, 'The amount to buy'),
  };
}

/** A key's daily spend cap as typed, in cents. */
export function keyCapCents(input: string): number {
  return dollarsWithin(input, KEY_CAP_CENTS, 'The daily cap');
}

/** A low-balance alert's threshold as typed, in cents. */
export function alertThresholdCents(input: string): number {
  return dollarsWithin(input, ALERT_THRESHOLD_CENTS, 'The alert threshold');
}
