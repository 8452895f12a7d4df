/**
 * The client's side of a relay (relay.ts): the stream it reads, compressed if asked, what one upstream
 * packet brings written as one, a keep-alive whenever nothing else was written, and its end.
 */
import { Readable } from 'node:stream';
import type { RelayOptions } from './relay-options.js';

export interface RelayStream {
  /** What the client reads. */
  readonly out: Readable;
  /** Queues text for the next write (one per upstream packet). */
  write(text: string): void;
  /** As write, and counts as activity: the next keep-alive waits keepAliveMs from here. */
  send(text: string): void;
  /** Stops the keep-alives, writes what is queued and ends the stream; idempotent. */
  end(): void;
  readonly ended: boolean;
}

export function relayStream(options: Pick<RelayOptions, 'compress' | 'keepAliveMs'>): RelayStream {
  const { compress } = options;
  // Pushed, not written: the relay never waits for its reader, so a stream with a writable side (a
  // PassThrough) would only add its write bookkeeping and a tick per write.
  const out = new Readable({
    read() {},
    destroy(error, callback) {
      compress?.close();
      callback(error);
    },
  });
  // What goes out: compressed if asked. A compressor's failure ends the client's stream, not the
  // relay, which still reads the upstream to its end and delivers.
  const emit = (data: string | null) => {
    if (out.destroyed) return;
    try {
      if (!compress) out.push(data);
      else if (data !== null) out.push(compress.write(data));
      else {
        out.push(compress.end());
        out.push(null);
      }
    } catch (error) {
      out.destroy(error as Error);
    }
  };
  let ended = false;
  // What is written while one upstream packet is handled leaves as one write (one gzip segment, one
  // write to the response stream): a packet often carries several events, and the first chunk
  // follows the opening keep-alive at once. The write goes out once the promise jobs of that packet
  // have run (process.nextTick runs after them), without waiting for another turn of the event loop.
  let pending = '';
  const flush = () => {
    if (pending && !ended) emit(pending);
    pending = '';
  };
  const write = (text: string) => {
    if (!pending) process.nextTick(flush);
    pending += text;
  };
  // An SSE comment whenever nothing has been written for keepAliveMs, before and after the first
  // chunk: CloudFront's origin read timeout fires on any silence, not only the first one.
  let lastWrite = Date.now();
  const send = (text: string) => {
    lastWrite = Date.now();
    write(text);
  };
  send(': keep-alive\n\n');
  const keepAlive = setInterval(
    () => {
      if (Date.now() - lastWrite >= options.keepAliveMs) send(': keep-alive\n\n');
    },
    Math.max(1, Math.floor(options.keepAliveMs / 4)),
  );
  return {
    out,
    write,
    send,
    // Keep-alives run until the usage is known (an estimate of a long reply takes a while); never
    // past the relay's end, whatever ended it.
    end() {
      if (ended) return;
      clearInterval(keepAlive);
      flush();
      ended = true;
      emit(null);
    },
    get ended() {
      return ended;
    },
  };
}
