/**
 * Exact money. No binary float ever holds an amount of money here.
 *
 * Units (all bigint):
 * - nano-USD (1e-9 USD): balances, billed costs, ledger entries.
 * - femto-USD (1e-15 USD): upstream costs before rounding. A price of P nano-USD per million tokens
 *   times T tokens is exactly P*T femto-USD, so the price table never rounds.
 *
 * Rounding rule (the only one): billed = upstream cost x 13/10, rounded UP to the next whole nano-USD.
 * So the billed amount is never below 1.3 x the upstream cost, and at most 1 nano-USD above it.
 */

export const NANO_PER_USD = 1_000_000_000n;
const FEMTO_PER_NANO = 1_000_000n;

export class InvalidAmountError extends Error {
  constructor(input: string, options?: ErrorOptions) {
    super(`not a decimal amount: ${JSON.stringify(input)}`, options);
    this.name = 'InvalidAmountError';
  }
}

const DECIMAL = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;

/**
 * Parses a decimal string (`"0.35"`, `"1.2e-7"`, `"-3"`) into an integer number of units of 10^-scale.
 * Throws if the value has more precision than the scale can hold exactly.
 */
export function parseDecimal(input: string, scale: number, rounding: 'exact' | 'ceil' = 'exact'): bigint {
  const match = DECIMAL.exec(input.trim());
  const [, sign = '', intPart = '', fracPart = '', exp = '0'] = match ?? [];
  if (!match || (intPart === '' && fracPart === '')) throw new InvalidAmountError(input);
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
/** USD decimal string -> femto-USD; digits finer than 1e-15 USD round up. */
export const usdToFemto = (usd: string): bigint => parseDecimal(usd, 15, 'ceil');

function ceilDiv(numerator: bigint, denominator: bigint): bigint {
  if (numerator <= 0n) return -(-numerator / denominator);
  return (numerator + denominator - 1n) / denominator;
}

/** The markup rule: upstream cost x 1.3, rounded up to a whole nano-USD. */
export function billedNanoFromUpstreamFemto(upstreamFemto: bigint): bigint {
  return ceilDiv(upstreamFemto * 13n, 10n * FEMTO_PER_NANO);
}

/** An upstream cost in femto-USD rounded up to nano-USD (for display and the ledger's record). */
export function femtoToNanoCeil(femto: bigint): bigint {
  return ceilDiv(femto, FEMTO_PER_NANO);
}
