import type { Readable } from 'node:stream';
import type { UpstreamBody } from '../functions/adapters/upstream-body.js';
import { UpstreamEvents } from '../functions/adapters/upstream-events.js';
import { relay } from '../functions/completions/relay.js';
import { usageForClient } from '../functions/core/usage.js';
import type { SyncGzip } from '../functions/shared/compression.js';
import { relayOptions } from '../test/support/relay-options.js';

/**
 * An upstream body through the relay as the completions function relays it (its events, the rewrite, gzip inside when given a compressor), billed at a fixed price: the benches'
 * relay without a function runtime or a database.
 */
export function relayed(body: UpstreamBody, events: number, compress?: SyncGzip): Readable {
  return relay(
    relayOptions(new UpstreamEvents(body, 1024 * 1024), {
      ...(compress ? { compress } : {}),
      settle: async () =>
        usageForClient({ promptTokens: 500, completionTokens: events, cachedTokens: 0 }, '0.0001'),
    }),
  );
}
