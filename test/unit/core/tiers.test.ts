import { describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_OUTPUT_TOKENS,
  outputCap,
  parseTierConfig,
  SIMULATOR_PRICES,
  singleUpstreamConfig,
  TierConfigError,
} from '../../../functions/core/tiers.js';

describe('parseTierConfig', () => {
  it('names the failing field', () => {
    const bad = singleUpstreamConfig('http://127.0.0.1:9/v1') as Record<string, unknown>;
    const [first] = bad['svc-pro'] as { prices: { output: string } }[];
    if (first) first.prices.output = '1.0000000000000001';
    expect(() => parseTierConfig(bad)).toThrow(TierConfigError);
    expect(() => parseTierConfig(bad)).toThrow(/svc-pro\.0\.prices\.output/);
  });

  it('maps tiers to the upstream model ids given', () => {
    const custom = parseTierConfig(
      singleUpstreamConfig('https://api.openai.com/v1', 'UPSTREAM_API_KEY', 'svc-fast=gpt-4o-mini'),
    );
    expect(custom['svc-fast'].targets[0]?.model).toBe('gpt-4o-mini');
    expect(custom['svc-pro'].targets[0]?.model).toBe('sim-pro');
    expect(custom['svc-fast'].targets[0]?.credential).toBe('UPSTREAM_API_KEY');
    expect(SIMULATOR_PRICES['svc-heavy'].output).toBe('2.5');
  });

  it('gives a bare list of targets the default output cap and takes an explicit one', () => {
    const base = singleUpstreamConfig('http://127.0.0.1:9/v1');
    const parsed = parseTierConfig({
      ...base,
      'svc-heavy': { targets: base['svc-heavy'], maxOutputTokens: 2000 },
    });
    expect(parsed['svc-fast'].maxOutputTokens).toBe(DEFAULT_MAX_OUTPUT_TOKENS);
    expect(parsed['svc-heavy'].maxOutputTokens).toBe(2000);
    expect(parsed['svc-heavy'].targets).toHaveLength(1);
  });

  it('names the field of a bad output cap', () => {
    const base = singleUpstreamConfig('http://127.0.0.1:9/v1');
    expect(() =>
      parseTierConfig({ ...base, 'svc-pro': { targets: base['svc-pro'], maxOutputTokens: -1 } }),
    ).toThrow(/svc-pro\.maxOutputTokens/);
  });
});

describe('outputCap', () => {
  const tier = { maxOutputTokens: 1000 };
  it("is the request's own cap when it sets one, else the tier's", () => {
    expect(outputCap({ max_completion_tokens: 50, max_tokens: 70 }, tier)).toBe(50);
    expect(outputCap({ max_tokens: 70 }, tier)).toBe(70);
    expect(outputCap({ max_tokens: null }, tier)).toBe(1000);
    expect(outputCap({}, tier)).toBe(1000);
  });
});
