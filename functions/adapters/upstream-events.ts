import { createParser, type EventSourceParser } from 'eventsource-parser';
import { parseChunkData, type UpstreamEvent } from '../core/upstream-reply.js';
import { Alarm, type UpstreamBody } from './upstream-body.js';

/** The body has no more events: it ended, or its connection failed after the events before it. */
export type StreamEnd = { kind: 'end' } | { kind: 'lost'; error: unknown };

/**
 * An upstream event stream as typed events (core/upstream-reply.ts), in order: every event that
 * arrived before a connection fault comes before the fault. Each event's data is parsed once, here.
 * An event larger than `maxEventBytes` is `malformed` (never delivered, never billed).
 *
 * The body is parsed as it arrives, in the connection's own callbacks (`UpstreamBody.feed`), and a
 * waiting reader is woken once per packet: a paced stream's event costs one promise, not one per
 * layer (the body's read, the parse loop, this reader). Events wait here only until the reader's
 * next turn: the relay takes them as fast as they come, and the body's byte bound bounds them.
 */
export class UpstreamEvents {
  private readonly pending: UpstreamEvent[] = [];
  private readonly parser: EventSourceParser;
  private readonly decoder = new TextDecoder();
  private finished: StreamEnd | undefined;
  /** A fault of this reader's own (not the connection's): thrown to the reader after the events before it. */
  private fault: unknown;
  private wake: (() => void) | undefined;
  private readonly alarm = new Alarm(() => this.wake?.());
  /** An SSE comment arrived (OpenRouter sends `: OPENROUTER PROCESSING` while it waits). */
  sawComment = false;

  constructor(
    private readonly body: UpstreamBody,
    private readonly maxEventBytes: number,
  ) {
    this.parser = createParser({
      onEvent: (event) => {
        this.pending.push(
          event.data.length > this.maxEventBytes
            ? { kind: 'malformed', reason: `event larger than ${this.maxEventBytes} bytes` }
            : parseChunkData(event.data),
        );
      },
      onComment: () => {
        this.sawComment = true;
      },
    });
    body.feed({
      piece: (piece) => this.parse(piece),
      end: () => this.finish({ kind: 'end' }),
      fail: (error) => this.finish({ kind: 'lost', error }),
    });
  }

  /**
   * The next event, or the stream's end; `'timeout'` when no event is complete within `timeoutMs`
   * (pieces that complete no event do not restart the wait).
   */
  next(timeoutMs = Number.POSITIVE_INFINITY): Promise<UpstreamEvent | StreamEnd | 'timeout'> {
    return this.when(Date.now() + timeoutMs, () => this.pending.shift() ?? this.end());
  }

  /**
   * Waits until the first event (or a comment) has arrived, without consuming it: what the stream
   * check in upstream.ts judges before committing to this upstream.
   */
  peek(deadline: number): Promise<UpstreamEvent | StreamEnd | 'comment' | 'timeout'> {
    return this.when(
      deadline,
      () => this.pending[0] ?? (this.sawComment ? 'comment' : undefined) ?? this.end(),
    );
  }

  /** Stops reading and drops the connection; a waiting reader gets the end. */
  cancel(): void {
    this.body.cancel();
    this.finish({ kind: 'end' });
  }

  /**
   * What `take` gives once it gives something (or throws), or `'timeout'` at `deadline` before that.
   * The promise is settled by the connection's callback itself: one promise between a packet and
   * its reader.
   */
  private when<T>(deadline: number, take: () => T | undefined): Promise<T | 'timeout'> {
    return new Promise((resolve, reject) => {
      const settled = (): boolean => {
        let taken: T | undefined;
        try {
          taken = take();
        } catch (error) {
          reject(error);
          return true;
        }
        if (taken !== undefined) resolve(taken);
        // Not a positive wait (NaN included): 'timeout' at once, as UpstreamBody.read answers.
        else if (!(deadline > Date.now())) resolve('timeout');
        else return false;
        return true;
      };
      if (settled()) return;
      this.wake = () => {
        if (settled()) this.wake = undefined;
        else this.alarm.wakeBy(deadline);
      };
      this.alarm.wakeBy(deadline);
    });
  }

  /** The stream's end once every event is taken; this reader's own fault is thrown instead. */
  private end(): StreamEnd | undefined {
    if (this.fault !== undefined) throw this.fault;
    return this.finished;
  }

  /** A piece of the body, parsed now: runs inside the connection's 'data' callback, so never throws. */
  private parse(piece: Buffer): void {
    if (this.finished) return;
    try {
      this.parser.feed(this.decoder.decode(piece, { stream: true }));
    } catch (error) {
      // Not expected (the parser and parseChunkData answer malformed input with values): a fault of
      // this reader's own is thrown to its reader after the events before it (the relay ends the
      // stream as the gateway's failure, billed), never out of the connection's callback.
      this.fault = error;
      this.body.cancel();
      this.finish({ kind: 'end' });
      return;
    }
    if (this.pending.length > 0 || this.sawComment) this.wake?.();
  }

  private finish(end: StreamEnd): void {
    if (this.finished) return;
    // An event cut off by the end of the body (no blank line after it) is discarded, as SSE says;
    // what the decoder still holds completes no event either.
    try {
      this.parser.feed(this.decoder.decode());
    } catch {
      // nothing more to parse
    }
    this.finished = end;
    this.alarm.stop();
    this.wake?.();
  }
}
