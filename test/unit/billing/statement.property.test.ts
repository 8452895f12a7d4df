import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { addMonths, monthlyStatement } from '../../../functions/billing/statement.js';
import type { LedgerEntry } from '../../../functions/core/store-ledger.js';

const START = Date.parse('2026-01-01T00:00:00.000Z');
const END = Date.parse('2027-01-01T00:00:00.000Z');
/** Times bunched on month edges (the first ms of a month, the last of the one before) now and then. */
const edge = fc
  .integer({ min: 0, max: 11 })
  .chain((m) =>
    fc.constantFrom(
      Date.UTC(2026, m, 1),
      Math.max(START, Date.UTC(2026, m, 1) - 1),
      Date.UTC(2026, m, 1) + 1,
    ),
  );
const time = fc.oneof(fc.integer({ min: START, max: END - 1 }), edge).map((ms) => new Date(ms).toISOString());

const entryOf = fc
  .record({
    type: fc.constantFrom<LedgerEntry['type']>('charge', 'topup', 'correction'),
    createdAt: time,
    amount: fc.bigInt({ min: 0n, max: 10n ** 13n }),
    keyId: fc.constantFrom('k1', 'k2', 'k3', undefined),
    tier: fc.constantFrom('svc-fast', 'svc-pro', 'svc-heavy', undefined),
    refund: fc.boolean(),
    n: fc.nat(),
  })
  .map(({ type, createdAt, amount, keyId, tier, refund, n }): LedgerEntry => {
    if (type === 'charge')
      return {
        entryId: `gen-${n}`,
        type,
        createdAt,
        deltaNano: -amount,
        ...(keyId ? { keyId } : {}),
        ...(tier ? { tier } : {}),
      };
    const reference = type === 'correction' && refund ? `stripe:refund:re_${n}` : `ref_${n}`;
    return {
      entryId: `${type}#${reference}`,
      type,
      createdAt,
      deltaNano: type === 'topup' ? amount : -amount,
      reference,
    };
  });

describe('monthly statements chain', () => {
  it('opening(m+1) = closing(m), each identity holds, and December closes on the whole ledger', () => {
    fc.assert(
      fc.property(fc.array(entryOf, { maxLength: 60 }), (entries) => {
        let month = '2026-01';
        let previous = monthlyStatement(entries, month);
        expect(previous.openingNano).toBe(0n);
        for (let i = 1; i < 12; i += 1) {
          month = addMonths(month, 1);
          const statement = monthlyStatement(entries, month);
          expect(statement.openingNano).toBe(previous.closingNano);
          previous = statement;
        }
        expect(previous.closingNano).toBe(entries.reduce((a, e) => a + e.deltaNano, 0n));
      }),
    );
  });
});
