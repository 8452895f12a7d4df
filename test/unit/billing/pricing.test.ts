import { describe, expect, it } from 'vitest';
import { priceUsage, tableCost } from '../../../functions/billing/pricing.js';
import { nanoToUsd } from '../../../functions/core/money.js';
import { parseTierConfig, singleUpstreamConfig, TIER_IDS } from '../../../functions/core/tiers.js';

const config = parseTierConfig(singleUpstreamConfig('http://127.0.0.1:9/v1'));
const target = (tier: (typeof TIER_IDS)[number]) => {
  const [first] = config[tier].targets;
  if (!first) throw new Error('no target');
  return first;
};

describe('priceUsage with the simulator price table', () => {
  it('bills the spec rates per million tokens (input, output) for every tier', () => {
    const spec = {
      'svc-fast': ['0.35', '1.43'],
      'svc-pro': ['0.72', '2.86'],
      'svc-heavy': ['0.78', '3.25'],
    } as const;
    for (const tier of TIER_IDS) {
      const input = priceUsage(
        { promptTokens: 1_000_000, completionTokens: 0, cachedTokens: 0 },
        target(tier),
      );
      const output = priceUsage(
        { promptTokens: 0, completionTokens: 1_000_000, cachedTokens: 0 },
        target(tier),
      );
      expect(nanoToUsd(input.billedNano)).toBe(spec[tier][0]);
      expect(nanoToUsd(output.billedNano)).toBe(spec[tier][1]);
    }
  });

  it('bills cached prompt tokens at the cached rate (10% of input)', () => {
    const all = priceUsage({ promptTokens: 1000, completionTokens: 0, cachedTokens: 0 }, target('svc-heavy'));
    const cached = priceUsage(
      { promptTokens: 1000, completionTokens: 0, cachedTokens: 1000 },
      target('svc-heavy'),
    );
    expect(all.billedNano).toBe(780_000n); // 1000 x $0.78/M
    expect(cached.billedNano).toBe(78_000n); // 1000 x $0.078/M
  });

  it('never counts more cached tokens than prompt tokens', () => {
    const capped = priceUsage(
      { promptTokens: 10, completionTokens: 0, cachedTokens: 50 },
      target('svc-heavy'),
    );
    expect(capped.upstreamCost).toBe(10n * 60_000_000_000_000n);
  });

  it('reads a reported cost by default, also in the short form (UPSTREAM_BASE_URL)', () => {
    const tiers = parseTierConfig(singleUpstreamConfig('http://127.0.0.1:9/v1'));
    const short = tiers['svc-fast'].targets[0];
    expect(short?.reportsCost).toBe(true);
    const charge = priceUsage(
      { promptTokens: 5, completionTokens: 5, cachedTokens: 0, reportedCostUsd: '0.000123456' },
      short ?? target('svc-fast'),
    );
    // 1.3 x 0.000123456 = 0.0001604928 exactly.
    expect(charge.billedNano).toBe(160_493n);
  });

  it("uses the upstream's own reported cost when the target reports one", () => {
    const reporting = { ...target('svc-fast'), reportsCost: true };
    const charge = priceUsage(
      { promptTokens: 5, completionTokens: 5, cachedTokens: 0, reportedCostUsd: '0.001' },
      reporting,
    );
    expect(charge.billedNano).toBe(1_300_000n);
    const ignored = priceUsage(
      { promptTokens: 5, completionTokens: 5, cachedTokens: 0, reportedCostUsd: '0.001' },
      { ...target('svc-fast'), reportsCost: false },
    );
    expect(ignored.billedNano).not.toBe(1_300_000n);
  });

  it('is never below 1.3 x the upstream cost', () => {
    for (let tokens = 0; tokens < 2000; tokens += 37) {
      const { upstreamCost, billedNano } = priceUsage(
        { promptTokens: tokens, completionTokens: tokens * 3, cachedTokens: tokens >> 1 },
        target('svc-pro'),
      );
      expect(billedNano * 10n ** 12n * 10n).toBeGreaterThanOrEqual(upstreamCost * 13n);
    }
  });
});

describe('cache writes', () => {
  it('are priced at the cacheWrite rate where the table has one, else as input', () => {
    const prices = { input: 1_000_000n, cachedInput: 100_000n, output: 2_000_000n };
    const usage = { promptTokens: 100, completionTokens: 0, cachedTokens: 10, cacheWriteTokens: 50 };
    expect(tableCost(usage, prices)).toBe(40n * 1_000_000n + 10n * 100_000n + 50n * 1_000_000n);
    expect(tableCost(usage, { ...prices, cacheWrite: 1_250_000n })).toBe(
      40n * 1_000_000n + 10n * 100_000n + 50n * 1_250_000n,
    );
  });

  it('never count more tokens than the uncached prompt', () => {
    const prices = { input: 1n, cachedInput: 1n, output: 1n, cacheWrite: 1_000n };
    expect(
      tableCost({ promptTokens: 10, completionTokens: 0, cachedTokens: 8, cacheWriteTokens: 50 }, prices),
    ).toBe(8n + 2n * 1_000n);
  });
});
