/**
 * Exact money. No binary float ever holds an amount of money here.
 *
 * Units (all bigint):
 * - nano-USD (1e-9 USD): balances, billed costs, ledger entries.
 * - prices: femto-USD (1e-15 USD) per million tokens, so a price table entry may have 15 decimals.
 * - upstream cost units (1e-21 USD): a price of P femto-USD per million tokens times T tokens is
 *   exactly P*T units, so pricing never rounds before the one rounding below.
 *
 * Rounding rule (the only one): billed = upstream cost x 13/10, rounded UP to the next whole nano-USD.
 * So the billed amount is never below 1.3 x the upstream cost, and at most 1 nano-USD above it.
 */

/** Decimal places of a price (USD per million tokens). */
export const PRICE_SCALE = 15;
/** Decimal places of an upstream cost (USD). */
export const COST_SCALE = 21;
const COST_UNITS_PER_NANO = 10n ** BigInt(COST_SCALE - 9);

export class InvalidAmountError extends Error {
  constructor(input: string, options?: ErrorOptions) {
    super(`not a decimal amount: ${JSON.stringify(input)}`, options);
    this.name = 'InvalidAmountError';
  }
}

const DECIMAL = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;

/** Longest digit string and largest exponent a decimal may have: parsing is bounded in time and memory. */
const MAX_DIGITS = 64;
const MAX_EXPONENT = 64;

/**
 * Parses a decimal string (`"0.35"`, `"1.2e-7"`, `"-3"`) into an integer number of units of 10^-scale.
 * Throws if the value has more precision than the scale can hold exactly, or more than 64 digits or an
 * exponent beyond +-64 (`0e999999999` would otherwise build a billion-digit power of ten).
 */
export function parseDecimal(input: string, scale: number, rounding: 'exact' | 'ceil' = 'exact'): bigint {
  const match = DECIMAL.exec(input.trim());
  const [, sign = '', intPart = '', fracPart = '', exp = '0'] = match ?? [];
  if (!match || (intPart === '' && fracPart === '')) throw new InvalidAmountError(input);
  if (intPart.length + fracPart.length > MAX_DIGITS || exp.replace(/^[+-]?0*/, '').length > 2)
    throw new InvalidAmountError(input);
  if (Math.abs(Number(exp)) > MAX_EXPONENT) throw new InvalidAmountError(input);
  const digits = `${intPart}${fracPart}`.replace(/^0+(?=\d)/, '');
  // value = digits * 10^(exp - fracLen); in units: digits * 10^(exp - fracLen + scale)
  const shift = Number(exp) - fracPart.length + scale;
  let units: bigint;
  if (shift >= 0) {
    units = BigInt(digits) * 10n ** BigInt(shift);
  } else {
    const divisor = 10n ** BigInt(-shift);
    const whole = BigInt(digits);
    if (whole % divisor !== 0n && rounding === 'exact') throw new InvalidAmountError(input);
    units = whole / divisor;
    // Round away from zero: for a cost that is "up", so no sub-unit of a reported cost is lost.
    if (whole % divisor !== 0n) units += 1n;
  }
  return sign === '-' ? -units : units;
}

/** Formats an integer number of 10^-scale units as a plain decimal string without exponent ("0.00000035"). */
export function formatDecimal(units: bigint, scale: number): string {
  const negative = units < 0n;
  const abs = negative ? -units : units;
  const base = 10n ** BigInt(scale);
  const whole = abs / base;
  const frac = (abs % base).toString().padStart(scale, '0').replace(/0+$/, '');
  return `${negative ? '-' : ''}${whole}${frac ? `.${frac}` : ''}`;
}

/** USD decimal string -> nano-USD. */
export const usdToNano = (usd: string): bigint => parseDecimal(usd, 9);
/** nano-USD -> USD decimal string. */
export const nanoToUsd = (nano: bigint): string => formatDecimal(nano, 9);
/** USD decimal string -> upstream cost units (1e-21 USD); finer digits round up. */
export const usdToCost = (usd: string): bigint => parseDecimal(usd, COST_SCALE, 'ceil');
/** Upstream cost units -> USD decimal string. */
export const costToUsd = (units: bigint): string => formatDecimal(units, COST_SCALE);

function ceilDiv(numerator: bigint, denominator: bigint): bigint {
  if (numerator <= 0n) return -(-numerator / denominator);
  return (numerator + denominator - 1n) / denominator;
}

/** The markup rule: upstream cost x 1.3, rounded up to a whole nano-USD. */
export function billedNanoFromUpstreamCost(upstreamCost: bigint): bigint {
  return ceilDiv(upstreamCost * 13n, 10n * COST_UNITS_PER_NANO);
}
