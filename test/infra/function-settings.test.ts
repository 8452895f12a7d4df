import { describe, expect, it } from 'vitest';
import { loadCompletionsConfig } from '../../functions/completions/config.js';
import { TRANSFER_DELAY_MS } from '../../functions/core/store.js';
import { FUNCTION_SETTINGS } from '../../lib/infra/function-settings.js';

describe('credit moved between the slices of an account', () => {
  it('waits at least as long as a completions invocation can run, and the hold expiry margin', () => {
    // A request admitted without a hold on the source bills it up to the function's timeout later;
    // credit moved before then would be spent twice (core/store.ts, TRANSFER_DELAY_MS).
    const { holdExpiryMarginMs } = loadCompletionsConfig({ UPSTREAM_BASE_URL: 'http://127.0.0.1:1' });
    expect(TRANSFER_DELAY_MS).toBeGreaterThanOrEqual(
      FUNCTION_SETTINGS.completions.timeoutSeconds * 1000 + holdExpiryMarginMs,
    );
  });
});
