import type { Readable } from 'node:stream';
import { relay } from '../../functions/completions/relay.js';
import type { RelayOptions, RelayOutcome } from '../../functions/completions/relay-options.js';
import { usageForClient } from '../../functions/core/usage.js';

/**
 * A relay's options as the tests run it: one fixed generation, tier and creation time, a 10 s
 * keep-alive and a 5 s idle timeout, and an upstream stop that does nothing; `overrides` replace any
 * of them.
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
    ...overrides,
  };
}

/**
 * The relay, finished as a generation finishes it once it has delivered, here at a fixed usage and
 * cost (0.5), or with no usage if `billed` is false (a generation that could not be priced);
 * `onDelivered` sees what it delivered first.
 */
export function relayFinishedAtFixedUsage(
  options: RelayOptions,
  onDelivered: (outcome: RelayOutcome) => void = () => {},
  billed = true,
): Readable {
  const relayed = relay(options);
  void relayed.delivered.then((outcome) => {
    onDelivered(outcome);
    relayed.finish(billed ? FIXED_USAGE : undefined);
  });
  return relayed.body;
}

/** The usage relayFinishedAtFixedUsage finishes with. */
export const FIXED_USAGE = usageForClient({ promptTokens: 1, completionTokens: 2, cachedTokens: 0 }, '0.5');
