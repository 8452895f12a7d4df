/**
 * The HTTP/1.1 exchange under the direct DynamoDB calls (wire.ts): a POST over a kept-alive socket to
 * one origin, and its answer read by status, `Content-Length` or chunked framing, `Connection` and
 * `Date`. That is all DynamoDB's JSON protocol needs, and it is written here instead of taken from
 * `node:http` for what it costs on the request path: `npx tsx bench/dynamodb-read.ts` (Node 22,
 * DynamoDB Local, the same signed read) measured 231 against 364 us of CPU a call back to back and 786
 * against 1,005 with 20 ms between calls, as an instance serving requests (the SDK client: 995 and
 * 2,006). Every request makes two such calls, and at 160 MB Lambda gives the function about a tenth of
 * a vCPU.
 *
 * Bounded like the agent it replaces: a connection gets `connectTimeoutMs`, an answer `silenceMs` of
 * socket silence and an optional caller's limit, a header block 64 KiB and a body 16 MiB (DynamoDB's
 * largest answer); anything it cannot read as HTTP/1.1 fails as `protocol` and the socket is dropped.
 * A socket is reused only after a complete answer that did not say `Connection: close`.
 */
import { channel } from 'node:diagnostics_channel';
import { isIP, connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

export interface Http1Origin {
  protocol: 'http:' | 'https:';
  hostname: string;
  port: number | undefined;
  /** Certificates trusted for https instead of Node's bundled CAs (a test's own; DynamoDB needs none). */
  ca?: string;
}

export interface Http1Answer {
  status: number;
  /** The `Date` header, when the answer had one (DynamoDB's clock, for signing-time corrections). */
  date: string | undefined;
  body: string;
}

export type Http1FailureKind = 'connect-timeout' | 'silence' | 'time-limit' | 'network' | 'protocol';

export class Http1Error extends Error {
  constructor(
    readonly kind: Http1FailureKind,
    message: string,
    options?: ErrorOptions & { nothingRead?: boolean },
  ) {
    super(message, options);
    this.name = 'Http1Error';
    this.nothingRead = options?.nothingRead ?? false;
  }

  /** The exchange failed before a byte of its answer arrived. */
  readonly nothingRead: boolean;
}

/**
 * Each exchange as it starts, for whoever listens (tests count the request path's calls with it, as
 * node:http's own `http.client.request.start` counts the SDK client's); the object published is kept
 * up to date (its bytes handed to the socket, its answer read). Nothing is built when nobody listens.
 */
export interface Http1Exchange {
  /** The request line and headers as sent. */
  head: string;
  /** The socket took every byte of the request. */
  written: boolean;
  answered: boolean;
}
export const HTTP1_START = 'hosted-model-api.http1.request.start';
const startChannel = channel(HTTP1_START);

const MAX_TIMER_MS = 2 ** 31 - 1;
const MAX_HEAD_BYTES = 64 * 1024;
const MAX_BODY_BYTES = 16 * 1024 * 1024;
/** Idle sockets kept for reuse; more are closed (a function instance makes one call at a time). */
const MAX_IDLE = 8;
const HEAD_END = Buffer.from('\r\n\r\n');
const CRLF = Buffer.from('\r\n');

/** One socket and the exchange it carries, if any. */
interface Connection {
  socket: Socket;
  exchange: Exchange | undefined;
}

export class Http1Client {
  private readonly idle: Connection[] = [];
  /** The last TLS session the origin gave, to resume on the next connection (as node:https's agent does). */
  private tlsSession: Buffer | undefined;

  constructor(
    private readonly origin: Http1Origin,
    private readonly timeouts: { connectTimeoutMs: number; silenceMs: number },
  ) {}

  /**
   * Sends `head` (the request line and headers, ending in an empty line) and `body` in one write, and
   * resolves with the answer; `timeLimitMs` (if finite) abandons the exchange, as `time-limit`.
   *
   * A kept-alive socket may have been closed by the server while it sat idle (an instance thawed after
   * minutes, say) without this process having read the close yet: if it fails before a byte of answer
   * arrives, the request goes again at once on a new connection, without the caller's backoff. The
   * request may have reached the server; the calls it carries are safe to repeat: reads, and a
   * settlement whose ClientRequestToken answers a repeat of a committed transaction as its success
   * without applying it again, and whose ledger entry must not exist yet
   * (test/integration/settlement-resend.test.ts).
   */
  async post(head: string, body: string, timeLimitMs = Number.POSITIVE_INFINITY): Promise<Http1Answer> {
    const started = Date.now();
    const reused = this.takeIdle();
    if (reused) {
      try {
        return await this.exchange(reused, head, body, timeLimitMs);
      } catch (error) {
        if (!(error instanceof Http1Error && error.kind === 'network' && error.nothingRead)) throw error;
        this.close(); // the other idle sockets are as old
      }
    }
    const connection = await this.connect(timeLimitMs - (Date.now() - started));
    return this.exchange(connection, head, body, timeLimitMs - (Date.now() - started));
  }

  private exchange(
    connection: Connection,
    head: string,
    body: string,
    timeLimitMs: number,
  ): Promise<Http1Answer> {
    return new Promise<Http1Answer>((resolve, reject) => {
      const exchange = new Exchange(
        (answer, reusable) => {
          connection.exchange = undefined;
          if (reusable) this.release(connection);
          else connection.socket.destroy();
          resolve(answer);
        },
        (error) => {
          connection.exchange = undefined;
          connection.socket.destroy();
          reject(error);
        },
        timeLimitMs,
      );
      connection.exchange = exchange;
      connection.socket.setTimeout(this.timeouts.silenceMs);
      if (!startChannel.hasSubscribers) {
        connection.socket.write(head + body);
        return;
      }
      const seen: Http1Exchange = { head, written: false, answered: false };
      exchange.onAnswered = () => {
        seen.answered = true;
      };
      connection.socket.write(head + body, () => {
        seen.written = true;
      });
      startChannel.publish(seen);
    });
  }

  /** Closes every idle socket (an exchange in progress ends by itself). */
  close(): void {
    for (const connection of this.idle.splice(0)) connection.socket.destroy();
  }

  private takeIdle(): Connection | undefined {
    for (let connection = this.idle.pop(); connection; connection = this.idle.pop()) {
      if (connection.socket.destroyed || connection.socket.readyState !== 'open') continue;
      connection.socket.ref();
      return connection;
    }
    return undefined;
  }

  private release(connection: Connection): void {
    const { socket } = connection;
    socket.setTimeout(0);
    if (socket.destroyed || this.idle.length >= MAX_IDLE) {
      socket.destroy();
      return;
    }
    // An idle socket does not keep the process alive, as node:http's agent does.
    socket.unref();
    this.idle.push(connection);
  }

  private connect(timeLimitMs: number): Promise<Connection> {
    const { protocol, hostname, port, ca } = this.origin;
    const socket =
      protocol === 'https:'
        ? tlsConnect({
            host: hostname,
            port: port ?? 443,
            ...(isIP(hostname) ? {} : { servername: hostname }),
            ALPNProtocols: ['http/1.1'],
            ...(ca ? { ca } : {}),
            ...(this.tlsSession ? { session: this.tlsSession } : {}),
          }).on('session', (session: Buffer) => {
            this.tlsSession = session;
          })
        : netConnect({ host: hostname, port: port ?? 80 });
    socket.setNoDelay(true);
    const connection: Connection = { socket, exchange: undefined };
    // Listeners for the socket's whole life: they act on the exchange it carries, if any.
    socket.on('data', (chunk: Buffer) => {
      if (connection.exchange) connection.exchange.read(chunk);
      else socket.destroy(); // bytes nobody asked for: the socket cannot be trusted again
    });
    socket.on('end', () => connection.exchange?.ended());
    socket.on('timeout', () => connection.exchange?.fail('silence', 'no answer in time'));
    socket.on('error', (error) => connection.exchange?.fail('network', error.message, error));
    socket.on('close', () => {
      connection.exchange?.fail('network', 'connection closed before the answer ended');
      const at = this.idle.indexOf(connection);
      if (at >= 0) this.idle.splice(at, 1);
    });
    return new Promise<Connection>((resolve, reject) => {
      const limit = Math.min(this.timeouts.connectTimeoutMs, timeLimitMs);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(
          limit < this.timeouts.connectTimeoutMs
            ? new Http1Error('time-limit', 'time limit passed while connecting')
            : new Http1Error('connect-timeout', 'connection timed out'),
        );
      }, limit);
      const failed = (error: Error) => {
        clearTimeout(timer);
        reject(new Http1Error('network', error.message, { cause: error }));
      };
      socket.once('error', failed);
      socket.once(protocol === 'https:' ? 'secureConnect' : 'connect', () => {
        clearTimeout(timer);
        socket.off('error', failed);
        socket.setKeepAlive(true, 1_000);
        resolve(connection);
      });
    });
  }
}

/** Reads one answer from the bytes as they arrive; settles once (answer or failure). */
class Exchange {
  /** The bytes before the end of the head (and any that came with it). */
  private head: Buffer = Buffer.alloc(0);
  private status = 0;
  private date: string | undefined;
  private keepAlive = true;
  /** The body's reader, once the head is read. */
  private body: BodyReader | undefined;
  private readonly timer: NodeJS.Timeout | undefined;
  private settled = false;
  /** An interim (1xx) answer was read and skipped. */
  private skippedInterim = false;
  /** Told of a complete answer before the caller is (for the diagnostics channel's record). */
  onAnswered: (() => void) | undefined;

  constructor(
    private readonly onAnswer: (answer: Http1Answer, reusable: boolean) => void,
    private readonly onFailure: (error: Http1Error) => void,
    timeLimitMs: number,
  ) {
    if (Number.isFinite(timeLimitMs))
      this.timer = setTimeout(
        () => this.fail('time-limit', 'time limit passed'),
        // Node fires a timer of more than 2^31 - 1 ms after 1 ms instead: such a limit is no limit.
        Math.min(Math.max(0, timeLimitMs), MAX_TIMER_MS),
      );
  }

  read(chunk: Buffer): void {
    if (this.settled) return;
    if (!this.body) {
      this.head = this.head.length === 0 ? chunk : Buffer.concat([this.head, chunk]);
      const rest = this.readHead();
      if (rest === undefined) return;
      chunk = rest;
    }
    const body = this.body as BodyReader;
    const state = body.push(chunk);
    if (state === 'done') this.answer(body.bytes());
    else if (state !== 'more') this.fail('protocol', state);
  }

  /** The peer ended its side: an answer framed by the connection's end is complete. */
  ended(): void {
    if (this.settled) return;
    if (this.body instanceof CloseBody) this.answer(this.body.bytes(), false);
    else this.fail('network', 'connection ended before the answer did');
  }

  fail(kind: Http1FailureKind, message: string, cause?: Error): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    const nothingRead = this.body === undefined && this.head.length === 0 && !this.skippedInterim;
    this.onFailure(new Http1Error(kind, message, { ...(cause ? { cause } : {}), nothingRead }));
  }

  private answer(body: Buffer, reusable = this.keepAlive): void {
    this.settled = true;
    clearTimeout(this.timer);
    this.onAnswered?.();
    this.onAnswer({ status: this.status, date: this.date, body: body.toString('utf8') }, reusable);
  }

  /**
   * Reads the status line and headers and chooses the body's reader: the bytes after the head, or
   * undefined while the head is incomplete (or failed). Interim (1xx) answers are skipped.
   */
  private readHead(): Buffer | undefined {
    for (;;) {
      const end = this.head.indexOf(HEAD_END);
      if (end < 0) {
        if (this.head.length > MAX_HEAD_BYTES) this.fail('protocol', 'answer head too large');
        return undefined;
      }
      const lines = this.head.toString('latin1', 0, end).split('\r\n');
      const rest = this.head.subarray(end + HEAD_END.length);
      const status = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(lines[0] ?? '');
      if (!status) {
        this.fail('protocol', 'not an HTTP/1.1 answer');
        return undefined;
      }
      this.status = Number(status[1]);
      if (this.status < 200) {
        this.head = rest;
        this.skippedInterim = true;
        continue;
      }
      const problem = this.readHeaders(lines);
      if (problem) {
        this.fail('protocol', problem);
        return undefined;
      }
      this.head = Buffer.alloc(0);
      return rest;
    }
  }

  /** Reads the headers this exchange needs and sets the body's reader; a problem's description if any. */
  private readHeaders(lines: string[]): string | undefined {
    let length: number | undefined;
    let chunked = false;
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i] as string;
      const colon = line.indexOf(':');
      if (colon <= 0) return 'malformed header line';
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (name === 'content-length') {
        if (!/^\d{1,9}$/.test(value) || (length !== undefined && length !== Number(value)))
          return 'invalid content-length';
        length = Number(value);
      } else if (name === 'transfer-encoding') {
        chunked = value.toLowerCase().split(',').pop()?.trim() === 'chunked';
        if (!chunked) return `unsupported transfer-encoding ${value.slice(0, 40)}`;
      } else if (name === 'connection') {
        if (
          value
            .toLowerCase()
            .split(',')
            .some((token) => token.trim() === 'close')
        )
          this.keepAlive = false;
      } else if (name === 'date') {
        this.date = value;
      }
    }
    if (length !== undefined && length > MAX_BODY_BYTES) return 'answer too large';
    // RFC 9112 section 6.3: chunked framing wins over a length (and such a socket is not reused).
    if (chunked) {
      this.body = new ChunkedBody();
      if (length !== undefined) this.keepAlive = false;
    } else if (length !== undefined) this.body = new LengthBody(length);
    else if (this.status === 204 || this.status === 304) this.body = new LengthBody(0);
    else {
      this.body = new CloseBody();
      this.keepAlive = false;
    }
    return undefined;
  }
}

/** 'more' until the body is complete, 'done' then, or what is wrong with it. */
type BodyState = 'more' | 'done' | (string & {});

interface BodyReader {
  push(chunk: Buffer): BodyState;
  bytes(): Buffer;
}

/** Pieces of a body, bounded by MAX_BODY_BYTES. */
class Pieces {
  protected readonly pieces: Buffer[] = [];
  protected total = 0;

  protected add(piece: Buffer): boolean {
    if (piece.length === 0) return true;
    this.pieces.push(piece);
    this.total += piece.length;
    return this.total <= MAX_BODY_BYTES;
  }

  bytes(): Buffer {
    return this.pieces.length === 1 ? (this.pieces[0] as Buffer) : Buffer.concat(this.pieces, this.total);
  }
}

/** A body of `Content-Length` bytes. */
class LengthBody extends Pieces implements BodyReader {
  constructor(private readonly length: number) {
    super();
  }

  push(chunk: Buffer): BodyState {
    this.add(chunk);
    if (this.total > this.length) return 'more bytes than the answer announced';
    return this.total === this.length ? 'done' : 'more';
  }
}

/** A body that ends with the connection. */
class CloseBody extends Pieces implements BodyReader {
  push(chunk: Buffer): BodyState {
    return this.add(chunk) ? 'more' : 'answer too large';
  }
}

/** A chunked body (RFC 9112 section 7.1), read as it arrives; chunk extensions and trailers are ignored. */
export class ChunkedBody extends Pieces implements BodyReader {
  private pending: Buffer = Buffer.alloc(0);
  private state: 'size' | 'data' | 'data-end' | 'trailers' | 'done' = 'size';
  private remaining = 0;

  push(chunk: Buffer): BodyState {
    if (this.state === 'done') return 'more bytes than the chunked body';
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    for (;;) {
      if (this.state === 'data') {
        const take = Math.min(this.remaining, this.pending.length);
        if (!this.add(this.pending.subarray(0, take))) return 'answer too large';
        this.remaining -= take;
        this.pending = this.pending.subarray(take);
        if (this.remaining > 0) return 'more';
        this.state = 'data-end';
      } else if (this.state === 'data-end') {
        if (this.pending.length < CRLF.length) return 'more';
        if (this.pending[0] !== 0x0d || this.pending[1] !== 0x0a) return 'malformed chunked body';
        this.pending = this.pending.subarray(CRLF.length);
        this.state = 'size';
      } else {
        const lineEnd = this.pending.indexOf(CRLF);
        if (lineEnd < 0) return this.pending.length > MAX_HEAD_BYTES ? 'malformed chunked body' : 'more';
        const line = this.pending.toString('latin1', 0, lineEnd);
        this.pending = this.pending.subarray(lineEnd + CRLF.length);
        if (this.state === 'trailers') {
          if (line.length > 0) continue;
          this.state = 'done';
          return this.pending.length === 0 ? 'done' : 'more bytes than the chunked body';
        }
        const size = line.split(';')[0]?.trim() ?? '';
        if (!/^[0-9a-fA-F]{1,7}$/.test(size)) return 'malformed chunked body';
        this.remaining = Number.parseInt(size, 16);
        this.state = this.remaining === 0 ? 'trailers' : 'data';
      }
    }
  }
}
