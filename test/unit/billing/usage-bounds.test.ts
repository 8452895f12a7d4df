import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { priceUsage, type TokenUsage } from '../../../functions/billing/pricing.js';
import {
  boundUsage,
  CAP_MARGIN,
  completionBound,
  IMAGE_TOKENS,
  promptBound,
  TEXT_SLACK,
} from '../../../functions/billing/usage-bounds.js';
import { parseDecimal } from '../../../functions/core/money.js';
import { parseTierConfig, singleUpstreamConfig } from '../../../functions/core/tiers.js';
import { readUpstreamUsage } from '../../../functions/core/usage.js';

const [target] = parseTierConfig(singleUpstreamConfig('http://127.0.0.1:9/v1'))['svc-fast'].targets;
if (!target) throw new Error('no target');
const prices = target.prices;
const limits = { outputCap: 16, promptBound: 500, completionTextBytes: 33 };
const usage = (u: Partial<TokenUsage>): TokenUsage => ({
  promptTokens: 10,
  completionTokens: 8,
  cachedTokens: 0,
  ...u,
});

describe('readUpstreamUsage', () => {
  it('reads counts, details and the exact cost text', () => {
    const raw = {
      prompt_tokens: 10,
      completion_tokens: 5,
      prompt_tokens_details: { cached_tokens: 4, cache_write_tokens: 3 },
      completion_tokens_details: { reasoning_tokens: 2, audio_tokens: 0 },
      cost: 0.0000123,
    };
    const report = readUpstreamUsage(raw, JSON.stringify({ usage: raw }).replace('0.0000123', '1.23e-5'));
    expect(report).toMatchObject({
      usage: {
        promptTokens: 10,
        completionTokens: 5,
        cachedTokens: 4,
        cacheWriteTokens: 3,
        reasoningTokens: 2,
        completionDetails: { reasoning_tokens: 2, audio_tokens: 0 },
        reportedCostUsd: '1.23e-5',
      },
    });
  });

  it('keeps a report with negative, fractional or non-numeric counts as invalid, never as usage', () => {
    for (const raw of [
      { prompt_tokens: -5, completion_tokens: 3 },
      { prompt_tokens: 5, completion_tokens: 1.5 },
      { prompt_tokens: '5', completion_tokens: 3 },
      { prompt_tokens: 5, completion_tokens: 3, prompt_tokens_details: { cached_tokens: -1 } },
      'lots',
    ]) {
      expect(readUpstreamUsage(raw)).toMatchObject({ invalid: expect.any(String) });
    }
    expect(readUpstreamUsage(null)).toBeUndefined();
    expect(readUpstreamUsage(undefined)).toBeUndefined();
  });
});

describe('boundUsage', () => {
  it('bills 1e12 reported completion tokens at the bound, not as reported', () => {
    const { usage: billed, adjustments } = boundUsage(usage({ completionTokens: 1e12 }), limits, prices);
    expect(billed.completionTokens).toBe(Math.min(16 + CAP_MARGIN, 33 + TEXT_SLACK));
    expect(adjustments[0]).toMatch(/completion_tokens 1000000000000 > bound/);
  });

  it('holds completion tokens to the text actually returned, plus reported reasoning up to the cap', () => {
    const wide = { outputCap: 10_000, promptBound: 500, completionTextBytes: 40 };
    expect(boundUsage(usage({ completionTokens: 500 }), wide, prices).usage.completionTokens).toBe(
      40 + TEXT_SLACK,
    );
    const reasoning = boundUsage(usage({ completionTokens: 2_040, reasoningTokens: 2_000 }), wide, prices);
    expect(reasoning.adjustments).toEqual([]);
    expect(completionBound(wide, 20_000)).toBe(10_000 + CAP_MARGIN);
  });

  it('holds prompt tokens to the prompt bound and cached tokens to the prompt', () => {
    const { usage: billed, adjustments } = boundUsage(
      usage({ promptTokens: 9_999, cachedTokens: 20_000 }),
      limits,
      prices,
    );
    expect(billed.promptTokens).toBe(500);
    expect(billed.cachedTokens).toBe(500);
    expect(adjustments).toHaveLength(2);
  });

  it('replaces a reported cost far above the price table with the table price', () => {
    const honest = priceUsage(usage({}), { ...target, reportsCost: false });
    const inflated = (honest.upstreamCost * 1000n) / 10n ** 21n;
    const costUsd = `${inflated === 0n ? '1' : inflated.toString()}`;
    const { usage: billed, adjustments } = boundUsage(usage({ reportedCostUsd: costUsd }), limits, prices);
    expect(billed.reportedCostUsd).toBeUndefined();
    expect(adjustments[0]).toMatch(/cost/);
    const fair = boundUsage(usage({ reportedCostUsd: '0.000002' }), limits, prices);
    expect(fair.usage.reportedCostUsd).toBe('0.000002');
  });

  it('leaves a usage within every bound untouched', () => {
    const within = usage({ promptTokens: 40, completionTokens: 12, cachedTokens: 10 });
    expect(boundUsage(within, limits, prices)).toEqual({ usage: within, adjustments: [] });
  });

  it('never bills more than the bounds allow, whatever is reported (property)', () => {
    fc.assert(
      fc.property(
        fc.record({
          promptTokens: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
          completionTokens: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
          cachedTokens: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
          reasoningTokens: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
        }),
        fc.record({
          outputCap: fc.integer({ min: 1, max: 100_000 }),
          promptBound: fc.integer({ min: 1, max: 1_000_000 }),
          completionTextBytes: fc.nat({ max: 1_000_000 }),
        }),
        (reported, lim) => {
          const { usage: billed } = boundUsage(reported, lim, prices);
          expect(billed.completionTokens).toBeLessThanOrEqual(lim.outputCap + CAP_MARGIN);
          expect(billed.promptTokens).toBeLessThanOrEqual(lim.promptBound);
          expect(billed.cachedTokens).toBeLessThanOrEqual(billed.promptTokens);
          const worst = priceUsage(
            { promptTokens: lim.promptBound, completionTokens: lim.outputCap + CAP_MARGIN, cachedTokens: 0 },
            { prices, reportsCost: false },
          );
          expect(priceUsage(billed, { prices, reportsCost: false }).billedNano).toBeLessThanOrEqual(
            worst.billedNano,
          );
        },
      ),
    );
  });
});

describe('promptBound', () => {
  it('is the body bytes plus per-message overhead and an allowance per image', () => {
    const text = promptBound(1_000, [{ content: 'hi' }]);
    const withImage = promptBound(1_000, [
      {
        content: [
          { type: 'text', text: 'hi' },
          { type: 'image_url', image_url: { url: 'https://x/y.png' } },
        ],
      },
    ]);
    expect(withImage - text).toBe(IMAGE_TOKENS);
    expect(text).toBeGreaterThan(1_000);
  });
});

it('keeps COST_SLACK tiny', () => {
  expect(parseDecimal('0.00001', 21)).toBe(10n ** 16n);
});
