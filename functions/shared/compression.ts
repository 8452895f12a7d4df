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
 * A stream's writes are compressed on the function's own thread as they arrive, through minizlib's
 * synchronous Gzip (npm's own zlib wrapper, the one under `tar` and npm itself), not by node:zlib's
 * stream, which hands every write to libuv's thread pool and back: for a streamed event of a few
 * hundred bytes that hand-off was about half of the compression's cost (`npx tsx bench/gzip-paced.ts`),
 * and it queued the events behind whatever else holds the pool's four threads (DNS lookups, file
 * reads, crypto). Only minizlib's public API is used here; minizlib itself drives node:zlib's
 * internals, and keeps up with Node's releases as npm has to.
 *
 * Not `@middy/http-content-encoding`: its 7.x needs Node.js 22 (it imports zstd from node:zlib) and
 * its 5.x leaves a streamed body uncompressed under a `Content-Encoding` header; neither flushes.
 */
import { PassThrough, Readable, Transform, type TransformCallback } from 'node:stream';
import { constants } from 'node:zlib';
import type { MiddlewareObj } from '@middy/core';
import { Gzip } from 'minizlib';
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
 * Whether a compressor can be made here, tried once, when a client first takes gzip (the compressor
 * made then is kept for its reply). Lambda updates a runtime's Node on its own; should an update
 * break minizlib (which drives node:zlib's internals), replies go out uncompressed (logged once, as
 * an error) instead of every gzip client's request failing.
 */
function canCompress(): boolean {
  if (compressorUsable === undefined) {
    try {
      kept ??= new Deflater();
      compressorUsable = true;
    } catch (error) {
      compressorUsable = false;
      logger.error('gzip is off: no compressor can be made', error as Error);
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

/** One gzip compressor, synchronous: minizlib's Gzip, its output taken as each write returns. */
class Deflater {
  /** A failure zlib reported: the compressor is not used again. */
  failed: Error | undefined;
  readonly #gzip: Gzip;
  readonly #out: Buffer[] = [];

  constructor() {
    this.#gzip = new Gzip({ ...GZIP_OPTIONS, flush: constants.Z_SYNC_FLUSH });
    this.#gzip.on('data', (piece: Buffer) => this.#out.push(piece));
    this.#gzip.on('error', (error: unknown) => {
      this.failed ??= error instanceof Error ? error : new Error(String(error));
    });
  }

  /** `input` compressed and sync-flushed, or (`finish`) the gzip member's end; throws on a failure. */
  write(input: Buffer, finish = false): Buffer {
    if (this.failed) throw this.failed;
    if (finish) this.#gzip.flush(constants.Z_FINISH);
    else this.#gzip.write(input);
    if (this.failed) throw this.failed;
    const out = this.#out.splice(0);
    return out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out);
  }

  /** Ready for a new gzip member; false if it cannot be (then it is freed instead). */
  reset(): boolean {
    if (!this.failed) this.#gzip.reset();
    return !this.failed;
  }

  free(): void {
    this.#gzip.close();
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
    return this.#open().write(typeof data === 'string' ? Buffer.from(data) : data);
  }

  end(): Buffer {
    // The member's end without freeing the compressor: it can be reset and kept.
    const trailer = this.#open().write(EMPTY, true);
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
