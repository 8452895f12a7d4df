import { describe, expect, it } from 'vitest';
import { needsHold, worstCaseBilledNano } from '../../../functions/billing/holds.js';
import { parseTierConfig, SIMULATOR_PRICES } from '../../../functions/core/tiers.js';

const targetsOf = (targets: unknown[]) =>
  parseTierConfig({ 'svc-fast': targets, 'svc-pro': targets, 'svc-heavy': targets })['svc-fast'].targets;
const cheap = {
  baseUrl: 'http://a/v1',
  model: 'a',
  prices: SIMULATOR_PRICES['svc-fast'],
  reportsCost: false,
};
const dear = {
  baseUrl: 'http://b/v1',
  model: 'b',
  prices: SIMULATOR_PRICES['svc-heavy'],
  reportsCost: false,
};

describe('worstCaseBilledNano', () => {
  it('prices the prompt bound and the cap + margin at the dearest target of the tier', () => {
    const [c, d] = targetsOf([cheap, dear]);
    if (!c || !d) throw new Error('targets');
    // svc-heavy: 1,000 prompt tokens at $0.6/M + (100 + 16) completion tokens at $2.5/M = $0.00089,
    // x 1.3 = $0.001157.
    expect(worstCaseBilledNano(1_000, 100, [c, d])).toBe(1_157_000n);
    expect(worstCaseBilledNano(1_000, 100, [d, c])).toBe(1_157_000n);
    // svc-fast alone: 1,000 at $0.269230769230769/M + 116 at $1.1/M = $0.000396830769230769, x 1.3
    // = $0.00051587999999999997, up to the next nano-dollar.
    expect(worstCaseBilledNano(1_000, 100, [c])).toBe(515_880n);
  });

  it('allows a reported cost up to its bound where the target reports one', () => {
    const [t] = targetsOf([{ ...cheap, reportsCost: true }]);
    if (!t) throw new Error('target');
    // The table price of 10 prompt and 5 + 16 completion tokens is $0.00002579230769230769; the bound
    // on a reported cost is 3 x that + $0.00001 = $0.00008737692307692307; x 1.3, rounded up.
    expect(worstCaseBilledNano(10, 5, [t])).toBe(113_590n);
  });

  it('prices the prompt at a cache-write rate above the input rate', () => {
    const [plain] = targetsOf([cheap]);
    const [writes] = targetsOf([{ ...cheap, prices: { ...cheap.prices, cacheWrite: '5' } }]);
    if (!plain || !writes) throw new Error('targets');
    expect(worstCaseBilledNano(1_000, 0, [writes])).toBeGreaterThan(worstCaseBilledNano(1_000, 0, [plain]));
  });
});

describe('needsHold', () => {
  it('is the fast path exactly while available credit covers every request that can run at once', () => {
    const worst = 1_000n;
    expect(needsHold({ balanceNano: 10_000n, heldNano: 0n }, worst, 10)).toBe(false);
    expect(needsHold({ balanceNano: 9_999n, heldNano: 0n }, worst, 10)).toBe(true);
    // What requests in flight hold is not available.
    expect(needsHold({ balanceNano: 10_000n, heldNano: 1n }, worst, 10)).toBe(true);
    expect(needsHold({ balanceNano: 20_000n, heldNano: 10_000n }, worst, 10)).toBe(false);
  });
});
