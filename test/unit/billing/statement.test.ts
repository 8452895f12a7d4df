import { describe, expect, it } from 'vitest';
import {
  addMonths,
  checkStatement,
  InvalidMonthError,
  monthBounds,
  monthlyStatement,
  StatementMismatchError,
} from '../../../functions/billing/statement.js';
import type { LedgerEntry } from '../../../functions/core/store-ledger.js';

let n = 0;
const entry = (
  type: LedgerEntry['type'],
  createdAt: string,
  deltaNano: bigint,
  extra: Partial<LedgerEntry> = {},
) => {
  n += 1;
  const reference = extra.reference ?? `ref-${n}`;
  const entryId =
    type === 'charge' ? `gen-${n}` : type === 'topup' ? `topup#${reference}` : `correction#${reference}`;
  return {
    entryId,
    type,
    createdAt,
    deltaNano,
    ...(type === 'charge' ? {} : { reference }),
    ...extra,
  } as LedgerEntry;
};
const charge = (createdAt: string, cost: bigint, keyId: string, tier: string) =>
  entry('charge', createdAt, -cost, { keyId, tier });

/** A year of an account: November before, December the month, January after; entries on the edges. */
const ledger: LedgerEntry[] = [
  entry('topup', '2026-10-03T10:00:00.000Z', 5_000_000_000n, { reference: 'initial' }),
  charge('2026-11-30T23:59:59.999Z', 123_456_789n, 'k1', 'svc-fast'),
  // Exactly at the month's start: December's.
  entry('topup', '2026-12-01T00:00:00.000Z', 10_000_000_000n, { reference: 'stripe:pi_1' }),
  charge('2026-12-01T00:00:00.000Z', 1n, 'k1', 'svc-fast'),
  charge('2026-12-02T08:00:00.000Z', 333_333_333n, 'k2', 'svc-pro'),
  charge('2026-12-02T08:00:01.000Z', 7n, 'k1', 'svc-pro'),
  charge('2026-12-09T12:00:00.000Z', 900_000_001n, 'k2', 'svc-heavy'),
  entry('charge', '2026-12-10T12:00:00.000Z', -50n, { tier: 'svc-fast' }),
  entry('correction', '2026-12-15T00:00:00.000Z', -2_500_000_000n, { reference: 'stripe:refund:re_1' }),
  entry('correction', '2026-12-20T00:00:00.000Z', -1_000_000_000n, { reference: 'stripe:dispute:dp_1' }),
  entry('correction', '2026-12-21T00:00:00.000Z', -12_345n, { reference: 'goodwill-fix' }),
  entry('topup', '2026-12-31T23:59:59.999Z', 2_000_000_000n, { reference: 'stripe:pi_2' }),
  // Exactly at the next month's start: January's.
  charge('2027-01-01T00:00:00.000Z', 99n, 'k1', 'svc-fast'),
  entry('correction', '2027-01-01T00:00:00.000Z', -10n, { reference: 'stripe:refund:re_2' }),
];

const sumBefore = (iso: string) =>
  ledger.filter((e) => Date.parse(e.createdAt) < Date.parse(iso)).reduce((a, e) => a + e.deltaNano, 0n);

describe('monthlyStatement', () => {
  const december = monthlyStatement([...ledger].reverse(), '2026-12');

  it('opens and closes on the ledger summed to the month edges, to the nano-dollar', () => {
    expect(december.from).toBe('2026-12-01T00:00:00.000Z');
    expect(december.to).toBe('2027-01-01T00:00:00.000Z');
    expect(december.openingNano).toBe(5_000_000_000n - 123_456_789n);
    expect(december.openingNano).toBe(sumBefore('2026-12-01T00:00:00.000Z'));
    expect(december.closingNano).toBe(sumBefore('2027-01-01T00:00:00.000Z'));
  });

  it('splits the month into top-ups, refunds, corrections and usage', () => {
    expect(december.topUpsNano).toBe(12_000_000_000n);
    expect(december.refundsNano).toBe(2_500_000_000n);
    expect(december.correctionsNano).toBe(1_000_012_345n);
    expect(december.usageNano).toBe(1n + 333_333_333n + 7n + 900_000_001n + 50n);
    expect(december.requests).toBe(5);
    expect(december.closingNano).toBe(
      december.openingNano +
        december.topUpsNano -
        december.refundsNano -
        december.correctionsNano -
        december.usageNano,
    );
  });

  it('gives usage by key and by tier, largest first, each adding up to the usage', () => {
    expect(december.byKey).toEqual([
      { name: 'k2', requests: 2, amountNano: 1_233_333_334n },
      { name: '', requests: 1, amountNano: 50n },
      { name: 'k1', requests: 2, amountNano: 8n },
    ]);
    expect(december.byTier).toEqual([
      { name: 'svc-heavy', requests: 1, amountNano: 900_000_001n },
      { name: 'svc-pro', requests: 2, amountNano: 333_333_340n },
      { name: 'svc-fast', requests: 2, amountNano: 51n },
    ]);
  });

  it('lists the top-ups, refunds and corrections, oldest first, entries on both edges placed right', () => {
    expect(december.lines.map((l) => [l.kind, l.reference, l.amountNano])).toEqual([
      ['topup', 'stripe:pi_1', 10_000_000_000n],
      ['refund', 'stripe:refund:re_1', 2_500_000_000n],
      ['correction', 'stripe:dispute:dp_1', 1_000_000_000n],
      ['correction', 'goodwill-fix', 12_345n],
      ['topup', 'stripe:pi_2', 2_000_000_000n],
    ]);
    const january = monthlyStatement(ledger, '2027-01');
    expect(january.openingNano).toBe(december.closingNano);
    expect(january.usageNano).toBe(99n);
    expect(january.refundsNano).toBe(10n);
    const november = monthlyStatement(ledger, '2026-11');
    expect(november.usageNano).toBe(123_456_789n);
    expect(november.closingNano).toBe(december.openingNano);
  });

  it('states an empty month: nothing moved, opening = closing', () => {
    const march = monthlyStatement(ledger, '2027-03');
    expect(march.openingNano).toBe(march.closingNano);
    expect(march.lines).toEqual([]);
    expect(monthlyStatement([], '2026-12').closingNano).toBe(0n);
  });

  it('refuses what is not a month', () => {
    for (const month of ['2026-13', '2026-1', '26-12', '1999-12', '2026-12.csv', ''])
      expect(() => monthBounds(month)).toThrow(InvalidMonthError);
    expect(addMonths('2026-12', 1)).toBe('2027-01');
    expect(addMonths('2026-01', -1)).toBe('2025-12');
  });

  it('refuses a statement that does not add up', () => {
    expect(() => checkStatement({ ...december, usageNano: december.usageNano + 1n })).toThrow(
      StatementMismatchError,
    );
    expect(() => checkStatement({ ...december, byKey: december.byKey.slice(1) })).toThrow(
      StatementMismatchError,
    );
  });
});
