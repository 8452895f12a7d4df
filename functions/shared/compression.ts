/**
 * gzip for clients that accept it, as a middy `after` middleware (CloudFront bills every
 * byte out, and an SSE stream repeats a ~250-byte chunk envelope for a few characters of text).
 *
 * The official SDKs ask for it: the OpenAI Node SDK's fetch (undici) sends `Accept-Encoding: gzip,
 * deflate`, the Python SDK's httpx the same, and both decode a stream as it arrives. A client that
 * does not ask (curl without `--compressed`) gets the bytes as they are.
 *
 * A stream is compressed with a sync flush after every write: each SSE event (and each keep-alive
 * comment) leaves as a complete deflate block, so compression never holds an event back and never
 * leaves CloudFront's origin read timeout without bytes. The compressor keeps its window (below)
 * across events, so the repeated envelope costs a few bytes per chunk. A string body (a JSON reply)
 * is compressed in one go when it is large enough to gain.
 *
 * A stream's writes are compressed on the function's own thread as they arrive, through the zlib
 * binding's synchronous write (`Deflater`, below), not by node:zlib's stream, which hands every write
 * to libuv's thread pool and back: for a streamed event of a few hundred bytes that hand-off was about
 * half of the compression's cost (64-118 against 34-70 us of CPU above an uncompressed write, medians
 * of three runs of `npx tsx bench/gzip-paced.ts`: paced writes of a 253-byte chunk on Node 22, the
 * same bytes out), and it queued the events behind whatever else holds the pool's four threads (DNS
 * lookups, file reads, crypto).
 *
 * Not `@middy/http-content-encoding`: its 7.x needs Node.js 22 (it imports zstd from node:zlib) and
 * its 5.x leaves a streamed body uncompressed under a `Content-Encoding` header; neither flushes.
 */
import { PassThrough, Readable, Transform, type TransformCallback } from 'node:stream';
import { constants, createGzip, type Gzip } from 'node:zlib';
import type { MiddlewareObj } from '@middy/core';
import Negotiator from 'negotiator';
import type { FunctionUrlEvent, FunctionUrlResult } from './http.js';
import { logger } from './observability.js';

/**
 * The compressor's size: an 8 KiB window and a 4 KiB hash table (zlib's defaults are 32 KiB and 64 KiB,
 * some 260 KiB of state with the buffers; these take about 45 KiB). An SSE chunk repeats its envelope
 * within a few hundred bytes, so a stream compresses nearly as well (300 chunks, 64,500 bytes: 1,043
 * against 967 bytes, `npx tsx bench/gzip-setup.ts`). The size matters because the functions run with
 * MALLOC_TRIM_THRESHOLD_=131072 (lib/infra/service-function.ts): zlib's default state, freed at the end
 * of every reply, went back to the system each time and was faulted in again by the next, about
 * 0.5 ms of CPU per compressed reply on Node 22 (690 against 198 us a 19-chunk reply in that script).
 */
export const GZIP_OPTIONS = { windowBits: 13, memLevel: 5 } as const;

/** Below this a JSON body is sent as it is: the gzip header and trailer would eat the gain. */
export const MIN_COMPRESSED_BYTES = 1024;

/**
 * The answers for the `Accept-Encoding` values seen last: clients send a handful of distinct values
 * (the SDKs' `gzip, deflate`, browsers' and curl's), and negotiating one was about 25 us of CPU a
 * request (V8 profile of the completions function, 1,500 JSON requests, which ask twice). Bounded in
 * count and in the length of a value kept, whatever a client sends.
 */
const ACCEPTS_GZIP = new Map<string, boolean>();
const ACCEPTS_GZIP_MAX_VALUES = 32;
const ACCEPTS_GZIP_MAX_LENGTH = 256;

/**
 * Whether the request's `Accept-Encoding` takes gzip (with a non-zero q-value, RFC 9110 section 12.5.3)
 * and this process can compress (`canCompress`).
 */
export function acceptsGzip(acceptEncoding: string | undefined): boolean {
  if (!acceptEncoding) return false;
  const known = ACCEPTS_GZIP.get(acceptEncoding);
  if (known !== undefined) return known && canCompress();
  const accepts =
    new Negotiator({ headers: { 'accept-encoding': acceptEncoding } }).encoding(['gzip']) === 'gzip';
  if (acceptEncoding.length <= ACCEPTS_GZIP_MAX_LENGTH) {
    if (ACCEPTS_GZIP.size >= ACCEPTS_GZIP_MAX_VALUES) ACCEPTS_GZIP.clear();
    ACCEPTS_GZIP.set(acceptEncoding, accepts);
  }
  return accepts && canCompress();
}

/** Whether a `Deflater` can be made here: undefined until a client first takes gzip. */
let compressorUsable: boolean | undefined;

/**
 * Whether this Node's zlib binding is as `Deflater` knows it, tried once, when a client first takes
 * gzip (the compressor made then is kept for its reply). Lambda updates a runtime's Node on its own;
 * should an update change node:zlib's internals, replies go out uncompressed (logged once, as an
 * error) instead of every gzip client's request failing.
 */
function canCompress(): boolean {
  if (compressorUsable === undefined) {
    try {
      kept ??= new Deflater();
      compressorUsable = true;
    } catch (error) {
      compressorUsable = false;
      logger.error('gzip is off: node:zlib is not as the compressor knows it', error as Error);
    }
  }
  return compressorUsable;
}

/**
 * A gzip stream of `source` that flushes after every write; a failed source fails it. Piped, not
 * `stream.pipeline`, which makes an AbortController and a DOMException for each stream.
 */
export function gzipStream(source: Readable): Readable {
  const gzip = new SyncFlushGzip();
  source.once('error', (error) => gzip.destroy(error));
  return source.pipe(gzip);
}

/** The parts of node:zlib's binding a `Deflater` drives (the same on Node 20 and 22). */
interface ZlibBinding {
  /**
   * Compresses `input[inOffset, inOffset + inLength)` into `out[outOffset, outOffset + outLength)`
   * with `flush`, on this thread; leaves the output space and input left unused in the stream's
   * write state. A failure is reported through `onerror`, before it returns.
   */
  writeSync(
    flush: number,
    input: Buffer,
    inOffset: number,
    inLength: number,
    out: Buffer,
    outOffset: number,
    outLength: number,
  ): void;
  /** deflateReset: a new gzip member from a clean state, the sizes kept. */
  reset(): void;
  onerror: (message: string, errno: number, code?: string) => void;
}

/**
 * One gzip compressor driven through the binding under node:zlib's stream, synchronously: the
 * stream only sets the binding up (and frees it on `close`); nothing is written through it. Why not
 * minizlib (which did this until 2026-11-26 through the stream's internal `_processChunk`): around
 * each write it swaps the binding's `close` and the global `Buffer.concat` for no-ops and back, and
 * removes and re-adds its error listener. Paced writes of an SSE chunk 5 ms apart, both ways in turn
 * in one process, the same bytes out (`npx tsx bench/gzip-binding.ts`, Node 22, three runs'
 * medians): 89, 66 and, with the process held to 160 MB's CPU share, 60 us of CPU per write through
 * minizlib against 67, 44 and 47 this way. `_handle` and `_writeState` are node:zlib's internals, as
 * minizlib's were, unchanged from Node 10 to 22; the compression tests run on Node 20 and the
 * end-to-end suite on Node 22, and a Node without them fails here at once, by name.
 */
class Deflater {
  /** A failure zlib reported: the compressor is not used again. */
  failed: Error | undefined;
  readonly #stream: Gzip;
  readonly #binding: ZlibBinding;
  /** The binding's write state: [output space left, input left] after each write. */
  readonly #state: Uint32Array;
  readonly #out = Buffer.allocUnsafe(16 * 1024);

  constructor() {
    // The stream's own output buffer is never used: the smallest zlib allows, not 16 KiB.
    this.#stream = createGzip({ ...GZIP_OPTIONS, chunkSize: constants.Z_MIN_CHUNK });
    const internals = this.#stream as unknown as { _handle: ZlibBinding; _writeState: Uint32Array };
    this.#binding = internals._handle;
    this.#state = internals._writeState;
    if (typeof this.#binding?.writeSync !== 'function' || !(this.#state instanceof Uint32Array)) {
      this.#stream.close();
      throw new Error(`node:zlib's binding is not as SyncGzip knows it (Node ${process.version})`);
    }
    // The binding reports a failure during writeSync; node:zlib's own handler would destroy the
    // stream and emit an 'error' event a tick later, an uncaught exception without a listener.
    this.#binding.onerror = (message) => {
      this.failed ??= new Error(`zlib: ${message}`);
    };
  }

  /** `input` compressed with `flush`: all of it consumed, all the output taken; throws on a failure. */
  write(input: Buffer, flush: number): Buffer {
    if (this.failed) throw this.failed;
    const out = this.#out;
    const pieces: Buffer[] = [];
    let offset = 0;
    for (;;) {
      this.#binding.writeSync(flush, input, offset, input.length - offset, out, 0, out.length);
      if (this.failed) throw this.failed;
      const outLeft = this.#state[0] ?? 0;
      const inLeft = this.#state[1] ?? 0;
      // A copy: the output space is reused by the next write.
      if (outLeft < out.length) pieces.push(Buffer.from(out.subarray(0, out.length - outLeft)));
      offset = input.length - inLeft;
      // Output space left over: zlib has written all it had.
      if (outLeft > 0) break;
    }
    return pieces.length === 1 ? (pieces[0] as Buffer) : Buffer.concat(pieces);
  }

  /** Ready for a new gzip member; false if it cannot be (then it is freed instead). */
  reset(): boolean {
    if (!this.failed) this.#binding.reset();
    return !this.failed;
  }

  free(): void {
    this.#stream.close();
  }
}

const EMPTY = Buffer.alloc(0);

/**
 * The compressor a finished stream left, reset, for the next one. Lambda runs one invocation at a
 * time in an instance, so one is enough there (the local runtime and the tests run several in one
 * process: a stream that finds none makes its own). Reusing it spares zlib's set-up and teardown of
 * its state for every reply: `npx tsx bench/gzip-kept.ts` (Node 22, the functions' environment, a
 * 19-chunk reply every 5 ms) measures both. zlib's reset starts a new gzip member from a clean state:
 * a reused compressor writes exactly the bytes a new one writes (test/unit/shared/compression.test.ts).
 */
let kept: Deflater | undefined;

/**
 * gzip on the caller's thread: each `write` returns its input compressed and sync-flushed (a complete
 * deflate block, so nothing is held back), and `end` the member's trailer; one gzip member in all.
 */
export class SyncGzip {
  #deflater: Deflater | undefined;

  constructor() {
    this.#deflater = kept ?? new Deflater();
    kept = undefined;
  }

  /** Compressed and flushed; throws if compression failed. */
  write(data: string | Buffer): Buffer {
    return this.#open().write(typeof data === 'string' ? Buffer.from(data) : data, constants.Z_SYNC_FLUSH);
  }

  end(): Buffer {
    // The member's end without freeing the compressor: it can be reset and kept.
    const trailer = this.#open().write(EMPTY, constants.Z_FINISH);
    this.close();
    return trailer;
  }

  /** Done with the compressor, ended or not: it is reset and kept for the next stream, or freed. */
  close(): void {
    const deflater = this.#deflater;
    if (!deflater) return;
    this.#deflater = undefined;
    if (!kept && deflater.reset()) kept = deflater;
    else deflater.free();
  }

  #open(): Deflater {
    if (!this.#deflater) throw new Error('the compressor is closed');
    return this.#deflater;
  }
}

/** Each write leaves, compressed and sync-flushed, before `write` returns. */
class SyncFlushGzip extends Transform {
  readonly #gzip = new SyncGzip();

  override _transform(part: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    let compressed: Buffer;
    try {
      compressed = this.#gzip.write(part);
    } catch (error) {
      callback(error as Error);
      return;
    }
    callback(null, compressed);
  }

  override _flush(callback: TransformCallback): void {
    let trailer: Buffer;
    try {
      trailer = this.#gzip.end();
    } catch (error) {
      callback(error as Error);
      return;
    }
    callback(null, trailer);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#gzip.close();
    callback(error);
  }
}

/** A reply's headers once its body is gzipped: the encoding, and that it varies with Accept-Encoding. */
export function gzipHeaders(headers: Record<string, string>): Record<string, string> {
  return {
    ...headers,
    'content-encoding': 'gzip',
    vary: headers.vary ? `${headers.vary}, accept-encoding` : 'accept-encoding',
  };
}

/**
 * gzips a reply for a client that accepts it: a large enough string body in one go, a stream
 * through gzipStream. A reply that already has its encoding (a relayed stream that compresses
 * itself, completions/relay.ts) is left as it is.
 */
export function compressResponse(): MiddlewareObj<FunctionUrlEvent, FunctionUrlResult> {
  return {
    after(request) {
      const response = request.response;
      if (!response || response.headers['content-encoding']) return;
      const { body } = response;
      // A small body is sent as it is, whatever the client takes.
      if (typeof body === 'string' && Buffer.byteLength(body) < MIN_COMPRESSED_BYTES) return;
      if (!acceptsGzip(request.event.headers?.['accept-encoding'])) return;
      if (typeof body === 'string') {
        // The kept compressor (SyncGzip), not gzipSync's new one: one write, then the member's end.
        const gzip = new SyncGzip();
        let compressed: Buffer;
        try {
          compressed = Buffer.concat([gzip.write(body), gzip.end()]);
        } finally {
          // Freed if it failed (an ended compressor is already kept, and this does nothing).
          gzip.close();
        }
        const out = new PassThrough();
        out.end(compressed);
        response.body = out;
      } else if (body instanceof Readable) {
        response.body = gzipStream(body);
      } else {
        return;
      }
      response.headers = gzipHeaders(response.headers);
    },
  };
}
