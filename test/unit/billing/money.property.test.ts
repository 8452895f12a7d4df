import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { priceUsage } from '../../../functions/billing/pricing.js';
import {
  billedNanoFromUpstreamCost,
  COST_SCALE,
  formatDecimal,
  nanoToUsd,
  PRICE_SCALE,
  parseDecimal,
  usdToNano,
} from '../../../functions/core/money.js';

/** Property tests over pricing and settlement arithmetic: exact, never below cost, never float. */
const tokens = fc.integer({ min: 0, max: 50_000_000 });
/** A price in USD per million tokens with up to 15 decimals, as the tier config holds it. */
const price = fc.bigInt({ min: 0n, max: 100n * 10n ** BigInt(PRICE_SCALE) });
const target = fc
  .record({ input: price, cachedInput: price, output: price })
  .map((prices) => ({ prices, reportsCost: false }));
const usage = fc
  .record({ promptTokens: tokens, completionTokens: tokens, cachedTokens: tokens })
  .map((u) => ({ ...u, cachedTokens: Math.min(u.cachedTokens, u.promptTokens) }));

const UNITS_PER_NANO = 10n ** BigInt(COST_SCALE - 9);

describe('pricing properties', () => {
  it('billed is never below 1.3 x upstream cost, and less than one nano-USD above it', () => {
    fc.assert(
      fc.property(usage, target, (u, t) => {
        const { upstreamCost, billedNano } = priceUsage(u, t);
        const exact = upstreamCost * 13n; // x10 units of 1e-21 USD
        const billed = billedNano * UNITS_PER_NANO * 10n;
        expect(billed >= exact).toBe(true);
        expect(billed - exact < UNITS_PER_NANO * 10n).toBe(true);
      }),
    );
  });

  it('is exactly the price table: uncached input, cached input and output priced separately', () => {
    fc.assert(
      fc.property(usage, target, (u, t) => {
        const { upstreamCost } = priceUsage(u, t);
        const expected =
          BigInt(u.promptTokens - u.cachedTokens) * t.prices.input +
          BigInt(u.cachedTokens) * t.prices.cachedInput +
          BigInt(u.completionTokens) * t.prices.output;
        expect(upstreamCost).toBe(expected);
      }),
    );
  });

  it('charges zero only when the upstream reported zero tokens (at non-zero prices)', () => {
    const positive = fc.bigInt({ min: 1n, max: 10n ** 16n });
    fc.assert(
      fc.property(usage, positive, positive, positive, (u, input, cachedInput, output) => {
        const { billedNano } = priceUsage(u, { prices: { input, cachedInput, output }, reportsCost: false });
        expect(billedNano === 0n).toBe(u.promptTokens === 0 && u.completionTokens === 0);
      }),
    );
  });

  it('takes a reported cost exactly, to 1e-21 USD, rounding finer digits up', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 24n }), (units) => {
        const text = formatDecimal(units, COST_SCALE);
        const { upstreamCost } = priceUsage(
          { promptTokens: 1, completionTokens: 1, cachedTokens: 0, reportedCostUsd: text },
          { prices: { input: 0n, cachedInput: 0n, output: 0n }, reportsCost: true },
        );
        expect(upstreamCost).toBe(units);
      }),
    );
  });
});

describe('settlement arithmetic properties', () => {
  it('any number of settlements sums exactly: balance after = balance before - sum of billed', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 10n ** 13n }),
        fc.array(fc.tuple(usage, target), { maxLength: 60 }),
        (start, charges) => {
          let balance = start;
          let sumOfCostsAsClientsSeeThem = 0n;
          for (const [u, t] of charges) {
            const { billedNano } = priceUsage(u, t);
            balance -= billedNano; // what the transaction's ADD does
            sumOfCostsAsClientsSeeThem += usdToNano(nanoToUsd(billedNano)); // what usage.cost carries
          }
          expect(start - balance).toBe(sumOfCostsAsClientsSeeThem);
        },
      ),
    );
  });

  it('usage.cost text round-trips through a JSON number back to the exact nano-USD', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 15n }), (nano) => {
        const asJsonNumber = JSON.parse(`{"cost":${nanoToUsd(nano)}}`).cost as number;
        expect(usdToNano(String(asJsonNumber))).toBe(nano);
      }),
    );
  });

  it('the rounding rule is monotonic: a larger upstream cost never bills less', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 10n ** 30n }),
        fc.bigInt({ min: 0n, max: 10n ** 30n }),
        (a, b) => {
          const [lo, hi] = a <= b ? [a, b] : [b, a];
          expect(billedNanoFromUpstreamCost(lo) <= billedNanoFromUpstreamCost(hi)).toBe(true);
        },
      ),
    );
  });

  it('decimal parsing and formatting are inverse', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: -(10n ** 20n), max: 10n ** 20n }),
        fc.integer({ min: 0, max: 21 }),
        (units, scale) => {
          expect(parseDecimal(formatDecimal(units, scale), scale)).toBe(units);
        },
      ),
    );
  });
});

describe('no binary float on the money path', () => {
  it('money modules do no float arithmetic on amounts', async () => {
    const { readFile } = await import('node:fs/promises');
    for (const file of ['functions/core/money.ts', 'functions/billing/pricing.ts']) {
      const source = await readFile(file, 'utf8');
      expect(source, file).not.toMatch(/parseFloat|toFixed|Math\.round|\* 1\.3|\/ 1\.3/);
    }
  });
});
