import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  OLD_CLAIM_COUNTEREXAMPLE,
  runModel,
  type Scenario,
  scenarioArbitrary,
} from '../../support/overdraft.js';

/**
 * The overdraft bound over a model of one slice (test/support/overdraft.ts), which the integration
 * test (test/integration/holds.test.ts) holds equal, step by step, to the real admission and store.
 */
describe('the overdraft bound (model of one slice)', () => {
  it('is broken as once stated ("one request\'s own cost") by 100 -> -149 at maxConcurrency 2', () => {
    const model = runModel(OLD_CLAIM_COUNTEREXAMPLE);
    expect(model.balance).toBe(-149n);
    expect(model.largestBill).toBe(100n);
    expect(model.excessOverOldClaim).toBe(49n);
    // The restated bound: C's bill (100) + A's, unbilled and without a hold when C was admitted (50).
    expect(model.bound).toBe(150n);
  });

  it('is found broken as once stated by the generator itself', () => {
    const result = fc.check(
      fc.property(scenarioArbitrary({ withDeferrals: false }), (scenario) => {
        expect(runModel(scenario).excessOverOldClaim).toBe(0n);
      }),
      // Found within a few thousand runs (the most in 30 seeds: about 8,000); the run stops there.
      { numRuns: 200_000 },
    );
    expect(result.failed).toBe(true);
    const [shrunk] = result.counterexample as [Scenario];
    const model = runModel(shrunk);
    expect(-model.balance).toBeGreaterThan(model.largestBill);
  });

  it('holds as restated over random interleavings of admissions, settlements, deferrals and expiries', () => {
    fc.assert(
      fc.property(scenarioArbitrary(), (scenario) => {
        // runModel checks the bound after every step and throws where it fails.
        runModel(scenario);
      }),
      { numRuns: 20_000 },
    );
  });
});
