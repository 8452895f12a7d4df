import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { UpstreamBody } from '../../functions/adapters/upstream-body.js';
import { UpstreamEvents } from '../../functions/adapters/upstream-events.js';

export interface FeedOptions {
  /** After the pieces the connection fails (as a reset does). */
  failAfter?: boolean;
  /** After the pieces the upstream goes silent, still connected. */
  hangAfter?: boolean;
  /** A pause before each piece after the first (separate packets). */
  gapMs?: number;
  /** The body's byte bound. */
  maxBytes?: number;
}

/**
 * An upstream body fed from byte pieces as a socket would hand them over, for tests and benches:
 * the real UpstreamBody and UpstreamEvents over a stream standing in for the IncomingMessage.
 */
export function upstreamEventsFrom(pieces: readonly Uint8Array[], opts: FeedOptions = {}): UpstreamEvents {
  const incoming = new PassThrough();
  const body = new UpstreamBody(incoming as unknown as IncomingMessage, opts.maxBytes ?? 10_000_000);
  void (async () => {
    let first = true;
    for (const piece of pieces) {
      if (opts.gapMs && !first) await new Promise((resolve) => setTimeout(resolve, opts.gapMs));
      first = false;
      if (incoming.destroyed) return;
      incoming.write(piece);
    }
    if (opts.failAfter) incoming.destroy(new Error('socket hang up'));
    else if (!opts.hangAfter) incoming.end();
  })();
  return new UpstreamEvents(body, 1024 * 1024);
}
