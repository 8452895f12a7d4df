import { describe, expect, it } from 'vitest';
import {
  billedNanoFromUpstreamCost,
  formatDecimal,
  InvalidAmountError,
  nanoToUsd,
  parseDecimal,
  usdToCost,
  usdToNano,
} from '../../../functions/core/money.js';

describe('parseDecimal', () => {
  it('parses plain, signed and exponent forms exactly', () => {
    expect(usdToNano('5')).toBe(5_000_000_000n);
    expect(usdToNano('0.35')).toBe(350_000_000n);
    expect(usdToNano('-1.5')).toBe(-1_500_000_000n);
    expect(usdToNano('3.5e-7')).toBe(350n);
    expect(usdToNano('1E2')).toBe(100_000_000_000n);
    expect(usdToNano('.5')).toBe(500_000_000n);
  });

  it('refuses precision it cannot hold, unless asked to round up', () => {
    expect(() => usdToNano('0.0000000001')).toThrow(InvalidAmountError);
    expect(parseDecimal('0.0000000001', 9, 'ceil')).toBe(1n);
    expect(usdToCost('1.2345678901234567e-7')).toBe(123_456_789_012_346n);
    expect(usdToCost('1e-22')).toBe(1n);
  });

  it('rejects text that is not a number', () => {
    for (const bad of ['', 'abc', '1.2.3', 'NaN', '1e', '--1'])
      expect(() => usdToNano(bad)).toThrow(InvalidAmountError);
  });
});

describe('formatDecimal', () => {
  it('writes plain decimals without exponent or trailing zeros', () => {
    expect(nanoToUsd(350n)).toBe('0.00000035');
    expect(nanoToUsd(5_000_000_000n)).toBe('5');
    expect(nanoToUsd(-1_250_000_000n)).toBe('-1.25');
    expect(formatDecimal(0n, 9)).toBe('0');
  });

  it('round-trips with parseDecimal', () => {
    for (const nano of [0n, 1n, 999_999_999n, 123_456_789_012n, -42n])
      expect(usdToNano(nanoToUsd(nano))).toBe(nano);
  });
});

describe('billedNanoFromUpstreamCost (x1.3, rounded up to a whole nano-USD)', () => {
  it('is exact when 1.3 x cost is a whole nano-USD', () => {
    expect(billedNanoFromUpstreamCost(10n ** 21n)).toBe(1_300_000_000n); // $1 -> $1.30
  });

  it('rounds a fraction of a nano-USD up, never down', () => {
    expect(billedNanoFromUpstreamCost(1n)).toBe(1n);
    // 769,230,769,230 units x 1.3 = 999,999,999,999: just under 1 nano-USD (1e12 units) -> 1
    expect(billedNanoFromUpstreamCost(769_230_769_230n)).toBe(1n);
    // 769,230,769,231 units x 1.3 = 1,000,000,000,000.3: just over 1 nano-USD -> 2
    expect(billedNanoFromUpstreamCost(769_230_769_231n)).toBe(2n);
  });

  it('charges nothing for a zero cost', () => {
    expect(billedNanoFromUpstreamCost(0n)).toBe(0n);
  });
});
