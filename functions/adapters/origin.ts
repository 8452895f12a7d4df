/**
 * The kept-alive connections to one origin (an upstream's, DynamoDB's) for the request path's outbound
 * calls: an undici `Pool`, with undici's own bounds. A connection gets `connectTimeoutMs`; an answer's
 * head 64 KiB (undici's `maxHeaderSize`; Node's own server takes 16 KiB) and, when given, its whole
 * body `maxResponseBytes`; each call sets its own head and body timeouts. undici reuses a socket
 * only after a complete answer that did not say `Connection: close`, drops one that sends bytes
 * nobody asked for, checks TLS certificates and host names as Node does, resumes TLS sessions, and
 * honours a server's `Keep-Alive: timeout=N` (less `KEEP_ALIVE_MARGIN_MS`) with its timers.
 *
 * An instance frozen between invocations fires no timer, so the hint is also kept by the wall clock:
 * once the last answer's hint has run out, the next call gets a new pool (the old one closes its idle
 * sockets and lets calls in progress finish), instead of a socket the server may have closed during
 * the freeze. An answer without a hint leaves its socket kept (up to undici's ten-minute cap).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { type Dispatcher, Pool } from 'undici';

/** Taken off a server's keep-alive hint: a socket is not reused in the last second the server gave. */
const KEEP_ALIVE_MARGIN_MS = 1_000;
/** An idle socket without a hint is kept this long (undici's `keepAliveMaxTimeout` default). */
const IDLE_WITHOUT_HINT_MS = 600_000;
const MAX_HEADER_BYTES = 64 * 1024;
/** A `Keep-Alive` header's idle timeout in seconds (`timeout=5, max=100`). */
const KEEP_ALIVE_TIMEOUT = /(?:^|,)[\t ]*timeout=(\d{1,6})[\t ]*(?:,|$)/i;

export interface OriginOptions {
  connectTimeoutMs: number;
  /** A whole answer larger than this fails (undici's `maxResponseSize`); none when left out. */
  maxResponseBytes?: number;
  /** Certificates trusted instead of Node's (a test's own server). */
  ca?: string;
}

export class Origin {
  #pool: Pool;
  /** When the last answer's keep-alive hint runs out, by the wall clock. */
  #reuseUntil = Number.POSITIVE_INFINITY;

  constructor(
    readonly url: string,
    private readonly options: OriginOptions,
  ) {
    this.#pool = this.#newPool();
  }

  /** The pool for the next call. */
  pool(): Pool {
    if (Date.now() >= this.#reuseUntil) {
      const stale = this.#pool;
      this.#pool = this.#newPool();
      this.#reuseUntil = Number.POSITIVE_INFINITY;
      void stale.close().catch(() => {});
    }
    return this.#pool;
  }

  /** An answer arrived with these `Keep-Alive` header values (if any): its hint starts now. */
  answered(keepAlive: string | string[] | undefined): void {
    const value = Array.isArray(keepAlive) ? keepAlive.join(', ') : keepAlive;
    const seconds = value === undefined ? undefined : KEEP_ALIVE_TIMEOUT.exec(value)?.[1];
    this.#reuseUntil =
      seconds === undefined
        ? Number.POSITIVE_INFINITY
        : Date.now() + Number(seconds) * 1_000 - KEEP_ALIVE_MARGIN_MS;
  }

  /** Closes the idle sockets (calls in progress finish). */
  close(): Promise<void> {
    return this.#pool.close();
  }

  #newPool(): Pool {
    const { connectTimeoutMs, maxResponseBytes, ca } = this.options;
    return new Pool(this.url, {
      connect: { timeout: connectTimeoutMs, ...(ca ? { ca } : {}) },
      maxHeaderSize: MAX_HEADER_BYTES,
      ...(maxResponseBytes ? { maxResponseSize: maxResponseBytes } : {}),
      keepAliveTimeout: IDLE_WITHOUT_HINT_MS,
      keepAliveTimeoutThreshold: KEEP_ALIVE_MARGIN_MS,
    });
  }
}

/**
 * The request body, let go of once written: undici keeps a request's `body` until its answer ends (a
 * stream's whole relay), and a 6 MB prompt's JSON would stay beside the parsed request that long.
 */
export function writtenOnce(text: string): { body: Iterable<Buffer>; length: number } {
  let pending: Buffer | undefined = Buffer.from(text);
  const length = pending.length;
  return {
    length,
    body: {
      *[Symbol.iterator]() {
        const buffer = pending;
        pending = undefined;
        if (buffer) yield buffer;
      },
    },
  };
}

/**
 * What the caller of one exchange hears: the answer's head, the pieces of its body as they arrive,
 * then either its end or the fault that ended it (after every piece that came before the fault), and
 * nothing after that.
 */
export interface ExchangeSink {
  head(status: number, headers: IncomingHttpHeaders): void;
  piece(bytes: Buffer): void;
  end(): void;
  fail(error: Error): void;
}

/**
 * Sends one request through undici's `dispatch`, its answer to `sink`, and returns what aborts it: the
 * sink hears the reason at once, even while the request still waits for its socket (undici then drops
 * it when the socket comes). Through `dispatch`, not `request` or `stream`: those add a Node stream,
 * an AbortSignal with its listeners and an async resource to every call, and on the request path's
 * DynamoDB read and settlement they were most of the CPU undici added (bench/billed-cpu.ts).
 * Informational (1xx) heads are skipped, as `request` skips them.
 */
export function exchange(
  dispatcher: Dispatcher,
  options: Dispatcher.DispatchOptions,
  sink: ExchangeSink,
): (reason: Error) => void {
  let controller: Dispatcher.DispatchController | undefined;
  let abortedBy: Error | undefined;
  let over = false;
  const finish = () => {
    const done = over;
    over = true;
    return !done;
  };
  dispatcher.dispatch(options, {
    onRequestStart(started) {
      controller = started;
      if (abortedBy) started.abort(abortedBy);
    },
    onResponseStart(_controller, status, headers) {
      if (!over && status >= 200) sink.head(status, headers);
    },
    onResponseData(_controller, bytes) {
      if (!over) sink.piece(bytes);
    },
    onResponseEnd() {
      if (finish()) sink.end();
    },
    onResponseError(_controller, error) {
      if (finish()) sink.fail(error);
    },
  });
  return (reason) => {
    if (abortedBy) return;
    abortedBy = reason;
    controller?.abort(reason);
    if (finish()) sink.fail(reason);
  };
}
