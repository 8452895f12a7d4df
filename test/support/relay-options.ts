import { usageForClient } from '../../functions/billing/usage.js';
import type { RelayOptions } from '../../functions/completions/relay-options.js';

/**
 * A relay's options as the tests and benches run it: one fixed generation, tier and creation time,
 * a 10 s keep-alive and a 5 s idle timeout, an upstream stop that does nothing, and a settlement that
 * prices at a fixed usage; `overrides` replace any of them.
 */
export function relayOptions(
  events: RelayOptions['events'],
  overrides: Partial<Omit<RelayOptions, 'events'>> = {},
): RelayOptions {
  return {
    events,
    generationId: 'gen-1767225600-AAAAAAAAAAAAAAAAAAAA',
    tier: 'svc-fast',
    created: 1_767_225_600,
    keepAliveMs: 10_000,
    idleTimeoutMs: 5_000,
    abortUpstream: () => {},
    settle: async () => usageForClient({ promptTokens: 1, completionTokens: 2, cachedTokens: 0 }, '0.5'),
    ...overrides,
  };
}
