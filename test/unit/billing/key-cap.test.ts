import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { capAdmission, capShareNano, dayOf, nextUtcMidnight } from '../../../functions/billing/key-cap.js';

describe("a key's daily cap shared over its account's slices", () => {
  it('gives every slice floor(cap / n), one nano more to the first cap mod n, summing to the cap exactly', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: 10n ** 18n }), fc.integer({ min: 1, max: 62 }), (cap, n) => {
        const shares = Array.from({ length: n }, (_, i) => capShareNano(cap, n, i));
        expect(shares.reduce((sum, share) => sum + share, 0n)).toBe(cap);
        const low = cap / BigInt(n);
        for (const share of shares) expect(share === low || share === low + 1n).toBe(true);
      }),
    );
    expect([0, 1, 2, 3].map((i) => capShareNano(10n, 4, i))).toEqual([3n, 3n, 2n, 2n]);
    expect(capShareNano(10n, 1, 0)).toBe(10n);
  });
});

describe('admission of a capped key', () => {
  const at = Date.parse('2026-03-04T12:00:00.000Z');
  const view = (spent: bigint, slices = 1) => ({
    capNano: 1_000n,
    slices,
    spentByDay: { '2026-03-04': spent, '2026-03-03': 99_999n },
  });

  it("is refused once the slice's counter for today reaches its share, only today's counting; else held", () => {
    expect(capAdmission(view(1_000n), 0, at).kind).toBe('reached');
    expect(capAdmission(view(999n), 0, at).kind).toBe('hold');
    // Yesterday's counter is spent far past the cap: it does not count today.
    expect(capAdmission(view(0n), 0, at)).toEqual({ kind: 'hold', shareNano: 1_000n, spentNano: 0n });
    // Split in 4: slice 0's share is 250.
    expect(capAdmission(view(250n, 4), 0, at).kind).toBe('reached');
    expect(capAdmission(view(249n, 4), 0, at).kind).toBe('hold');
  });

  it('resets at 00:00 UTC: the day of an instant and the next midnight', () => {
    const last = Date.parse('2026-03-04T23:59:59.999Z');
    expect(dayOf(last)).toBe('2026-03-04');
    expect(dayOf(last + 1)).toBe('2026-03-05');
    expect(new Date(nextUtcMidnight(last)).toISOString()).toBe('2026-03-05T00:00:00.000Z');
    expect(new Date(nextUtcMidnight(last + 1)).toISOString()).toBe('2026-03-06T00:00:00.000Z');
    expect(capAdmission(view(1_000n), 0, last).kind).toBe('reached');
    expect(capAdmission(view(1_000n), 0, last + 1).kind).toBe('hold');
  });
});
