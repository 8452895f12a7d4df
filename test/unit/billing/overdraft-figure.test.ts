import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { worstCaseBilledNano } from '../../../functions/billing/holds.js';
import { promptBound } from '../../../functions/billing/usage-bounds.js';
import { nanoToUsd } from '../../../functions/core/money.js';
import { parseTierConfig, singleUpstreamConfig } from '../../../functions/core/tiers.js';

/**
 * The overdraft bound in dollars, as ARCHITECTURE.md (invariant 4) and docs/billing.md state it: at
 * most MAX_CONCURRENCY (default 1000) worst cases per slice, the worst case of svc-heavy, the dearest
 * tier, at its default output cap. Computed by the code that computes a hold.
 */
const MAX_CONCURRENCY = 1_000n;
const message = [{ content: 'x' }];

describe('the overdraft bound in dollars', () => {
  it('with config/tiers.example.json: svc-heavy at 32,768 output tokens', () => {
    const tiers = parseTierConfig(JSON.parse(readFileSync('config/tiers.example.json', 'utf8')));
    const heavy = tiers['svc-heavy'];
    expect(heavy.maxOutputTokens).toBe(32_768);
    // A 1 KiB body: a prompt bound of 1,024 + 1,024 + 16 = 2,064 tokens.
    expect(promptBound(1_024, message)).toBe(2_064);
    // (2,064 x $2 + 32,784 x $8) / 1M = $0.266400; x 3 + $0.00001 (a reported cost's bound) = $0.79921;
    // x 1.3 = $1.038973.
    const small = worstCaseBilledNano(2_064, heavy.maxOutputTokens, heavy.targets);
    expect(nanoToUsd(small)).toBe('1.038973');
    expect(nanoToUsd(small * MAX_CONCURRENCY)).toBe('1038.973');
    // A 1 MiB body: 1,049,616 tokens; (1,049,616 x $2 + 32,784 x $8) / 1M = $2.361504; x 3 + $0.00001
    // = $7.084522; x 1.3 = $9.2098786.
    expect(promptBound(1_048_576, message)).toBe(1_049_616);
    const large = worstCaseBilledNano(1_049_616, heavy.maxOutputTokens, heavy.targets);
    expect(nanoToUsd(large)).toBe('9.2098786');
    expect(nanoToUsd(large * MAX_CONCURRENCY)).toBe('9209.8786');
  });

  it('in the sandbox (the simulator prices): svc-heavy at 8,192 output tokens', () => {
    const heavy = parseTierConfig(singleUpstreamConfig('http://sim.example/v1'))['svc-heavy'];
    expect(heavy.maxOutputTokens).toBe(8_192);
    // (2,064 x $0.6 + 8,208 x $2.5) / 1M = $0.0217584; x 3 + $0.00001 = $0.0652852; x 1.3 = $0.08487076.
    const small = worstCaseBilledNano(2_064, heavy.maxOutputTokens, heavy.targets);
    expect(nanoToUsd(small)).toBe('0.08487076');
    expect(nanoToUsd(small * MAX_CONCURRENCY)).toBe('84.87076');
  });
});
