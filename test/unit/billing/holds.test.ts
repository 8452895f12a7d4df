import { describe, expect, it } from 'vitest';
import { needsHold, worstCaseBilledNano } from '../../../functions/billing/holds.js';
import { billedNanoFromUpstreamCost } from '../../../functions/billing/money.js';
import { tableCost } from '../../../functions/billing/pricing.js';
import { CAP_MARGIN, COST_FACTOR, COST_SLACK } from '../../../functions/billing/usage-bounds.js';
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
    const expected = billedNanoFromUpstreamCost(
      tableCost({ promptTokens: 1_000, completionTokens: 100 + CAP_MARGIN, cachedTokens: 0 }, d.prices),
    );
    expect(worstCaseBilledNano(1_000, 100, [c, d])).toBe(expected);
    expect(worstCaseBilledNano(1_000, 100, [d, c])).toBe(expected);
    expect(worstCaseBilledNano(1_000, 100, [c])).toBeLessThan(expected);
  });

  it('allows a reported cost up to its bound where the target reports one', () => {
    const [t] = targetsOf([{ ...cheap, reportsCost: true }]);
    if (!t) throw new Error('target');
    const table = tableCost(
      { promptTokens: 10, completionTokens: 5 + CAP_MARGIN, cachedTokens: 0 },
      t.prices,
    );
    expect(worstCaseBilledNano(10, 5, [t])).toBe(
      billedNanoFromUpstreamCost(table * COST_FACTOR + COST_SLACK),
    );
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
