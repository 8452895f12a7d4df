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
 * The real UpstreamBody fed from a stream standing in for the connection, as undici feeds it
 * (functions/adapters/upstream-body.ts, openStream): each piece written, the stream's end as the body's, its
 * error or an early close as a network failure; dropping the body destroys the stream.
 */
export function upstreamBodyOver(incoming: PassThrough, maxBytes: number): UpstreamBody {
  const body = new UpstreamBody(maxBytes, () => incoming.destroy());
  incoming.on('data', (piece: Buffer) => body.piece(piece));
  incoming.on('end', () => body.end());
  incoming.on('error', (error) => body.fail(error));
  // Closed without an end or an error (destroyed): after an end, the body ignores it.
  incoming.on('close', () => body.fail(new Error('connection closed before the answer ended')));
  return body;
}

/**
 * An upstream body fed from byte pieces as a socket would hand them over, for tests and benches:
 * the real UpstreamBody and UpstreamEvents over a stream standing in for the connection.
 */
export function upstreamEventsFrom(pieces: readonly Uint8Array[], opts: FeedOptions = {}): UpstreamEvents {
  const incoming = new PassThrough();
  const body = upstreamBodyOver(incoming, opts.maxBytes ?? 10_000_000);
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
