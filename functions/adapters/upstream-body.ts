import type { ExchangeRequest, Origin } from './origin.js';

/**
 * An upstream response body as the connection hands it over (upstream.ts): every piece received before a
 * fault is given to the reader, then the fault. (A web stream made with `Readable.toWeb` discards what
 * it has queued when the socket errors: an upstream that burst 2,000 events and reset the connection
 * lost up to three quarters of them, and the bill counted only what survived.)
 *
 * Pieces are taken as they arrive, so nothing waits in a socket's buffer when the connection drops;
 * what has arrived waits here, bounded by `maxBytes` (past it the body is a fault, and the connection
 * is dropped). One reader at a time.
 */
export class UpstreamBody {
  private readonly queue: Buffer[] = [];
  private received = 0;
  private ended = false;
  private fault: Error | undefined;
  private wake: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** When `timer` fires (epoch ms). */
  private timerAt = 0;

  /** `abort` drops the connection (the body is not wanted, or too large). */
  constructor(
    private readonly maxBytes: number,
    private readonly abort: () => void,
  ) {}

  /** A piece of the body, as it arrived. */
  piece(bytes: Buffer): void {
    if (this.fault || this.ended) return;
    this.received += bytes.byteLength;
    if (this.received > this.maxBytes) {
      this.fail(new BodyTooLargeError(this.maxBytes));
      this.abort();
      return;
    }
    this.queue.push(bytes);
    this.notify();
  }

  /** The body is complete. */
  end(): void {
    if (this.fault) return;
    this.ended = true;
    this.stopTimer();
    this.notify();
  }

  /** Bytes received so far. */
  get bytesReceived(): number {
    return this.received;
  }

  /**
   * The next piece; `null` at the body's end; `'timeout'` when nothing arrived within `timeoutMs`.
   * Rejects with the connection's fault only once every piece that came before it has been read.
   */
  async read(timeoutMs = Number.POSITIVE_INFINITY): Promise<Buffer | null | 'timeout'> {
    // Not a positive number of ms (NaN included): whatever has arrived, else 'timeout' at once.
    const deadline = Date.now() + (Number.isNaN(timeoutMs) ? 0 : Math.max(0, timeoutMs));
    for (;;) {
      const ready = this.take();
      if (ready !== undefined) return ready;
      if (Date.now() >= deadline) return 'timeout';
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        this.wakeBy(deadline);
      });
      this.wake = undefined;
    }
  }

  /**
   * Makes sure a reader waiting until `deadline` is woken by then. One timer serves many reads: a
   * paced stream's reader waits for every event with a deadline a little later than the last one's,
   * and a timer set and cleared per read was some 5% of a paced event's CPU in a profile of the
   * function. A timer armed for an earlier time is kept: it wakes the reader early, and the reader
   * waits again, re-arming it for what is left.
   */
  private wakeBy(deadline: number): void {
    if (deadline === Number.POSITIVE_INFINITY) return;
    if (this.timer && this.timerAt <= deadline) return;
    clearTimeout(this.timer);
    this.timerAt = deadline;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.notify();
    }, deadline - Date.now());
  }

  /** Stops reading: the connection is dropped, whatever is queued is released. */
  cancel(): void {
    this.queue.length = 0;
    this.ended = true;
    this.stopTimer();
    this.abort();
    this.notify();
  }

  private take(): Buffer | null | undefined {
    const piece = this.queue.shift();
    if (piece) return piece;
    if (this.fault) throw this.fault;
    if (this.ended) return null;
    return undefined;
  }

  /** The connection failed (or the body was too large): the reader gets it after the pieces before it. */
  fail(error: Error): void {
    if (this.ended) return;
    this.fault ??= error;
    this.stopTimer();
    this.notify();
  }

  private stopTimer(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private notify(): void {
    this.wake?.();
  }
}

/** The body grew past the bound its reader set (untrusted input, OWASP API10). */
export class BodyTooLargeError extends Error {
  constructor(maxBytes: number) {
    super(`upstream body larger than ${maxBytes} bytes`);
    this.name = 'BodyTooLargeError';
  }
}

/** An answer's status and headers (lower-case names, a repeated one as an array), its body arriving. */
export interface StreamedAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: UpstreamBody;
}

/** Why a reader dropped a body it no longer wanted (never reported: the reader knows). */
const ABANDONED = new Error('the body was abandoned by its reader');

/**
 * Sends a request (origin.ts `exchange`) and resolves at the answer's head, its body written as it
 * arrives into an UpstreamBody of at most `maxBytes`: every piece received before a fault is there
 * before the fault, which a body stream would discard as it is destroyed. A failure before the head rejects;
 * after it, it is the body's fault. `abort` ends the request with a reason (before the head, the
 * answer rejects with it); cancelling the body aborts it too. `onComplete` runs once the whole body
 * has arrived.
 */
export function openStream(
  origin: Origin,
  request: ExchangeRequest,
  maxBytes: number,
  onComplete?: (answer: StreamedAnswer) => void,
): { answer: Promise<StreamedAnswer>; abort: (reason: Error) => void } {
  let abort: (reason: Error) => void = () => {};
  const answer = new Promise<StreamedAnswer>((resolve, reject) => {
    let answered: StreamedAnswer | undefined;
    abort = origin.exchange(request, {
      head(status, headers) {
        answered = {
          status,
          headers: headers as StreamedAnswer['headers'],
          body: new UpstreamBody(maxBytes, () => abort(ABANDONED)),
        };
        resolve(answered);
      },
      piece(bytes) {
        answered?.body.piece(bytes);
      },
      end() {
        if (!answered) return reject(new Error('the answer ended before its head'));
        onComplete?.(answered);
        answered.body.end();
      },
      fail(error) {
        if (answered) answered.body.fail(error);
        else reject(error);
      },
    });
  });
  return { answer, abort: (reason) => abort(reason) };
}
