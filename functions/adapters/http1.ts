/**
 * The HTTP/1.1 exchange under the request path's outbound calls: the direct DynamoDB calls
 * (dynamodb/wire.ts) and the upstream model call (upstream.ts). A POST over a kept-alive socket to one
 * origin, its answer read by status, headers, and `Content-Length`, chunked or connection-end framing;
 * a DynamoDB answer whole (`post`), an upstream's body piece by piece as it arrives (`open`).
 *
 * Written here instead of taken from `node:http` for what node:http's per-request work costs on the
 * request path, where at 160 MB Lambda gives the function about a tenth of a vCPU:
 * `npx tsx bench/dynamodb-read.ts` (Node 22, DynamoDB Local, the same signed read) measured 231
 * against 364 us of CPU a call back to back and 786 against 1,005 with 20 ms between calls (the SDK
 * client: 995 and 2,006); `npx tsx bench/upstream-call.ts` measures the upstream call both ways.
 *
 * Bounded like the agent it replaces: a connection gets `connectTimeoutMs`, an answer `silenceMs` of
 * socket silence (0: none) and an optional caller's limit (for a streamed answer, until its head), a
 * header block 64 KiB (a chunked body's trailers too) and a whole answer 16 MiB (DynamoDB's largest;
 * a streamed body is bounded by its reader); anything it cannot read as HTTP/1.1 fails as `protocol`
 * and the socket is dropped, read no more leniently than Node's own parser reads it
 * (test/unit/adapters/http1.property.test.ts). A socket is reused only after a complete answer that
 * did not say `Connection: close`. Nothing follows redirects or decodes a `Content-Encoding` (none is
 * asked for).
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

/** A streamed answer's head; its body goes to the sink `open` was given. */
export interface Http1StreamHead {
  readonly status: number;
  /** Header values by lower-case name; a repeated header's values joined with ", " (as fetch's `Headers`). */
  readonly headers: ReadonlyMap<string, string>;
  /**
   * Drops the exchange and its socket; the sink hears nothing more. Does nothing once the body has
   * ended (the socket may then carry another exchange).
   */
  abort(): void;
}

/** Where a streamed answer's body goes: its pieces in order, then its end or the fault that ended it. */
export interface Http1BodySink {
  piece(bytes: Buffer): void;
  end(): void;
  fail(error: Http1Error): void;
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
 * Each exchange as it starts, for whoever listens (tests count the request path's calls with it); the
 * object published is kept up to date (its bytes handed to the socket, its answer read). Nothing is
 * built when nobody listens.
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
const EMPTY = Buffer.alloc(0);

// What an answer's head and a chunk's size line may hold, as RFC 9112 and Node's own parser (llhttp)
// read them: a reader more lenient than the parsers around it is how one message is framed two ways.
// Each pattern is linear in its line (a line is at most 64 KiB of an upstream's choosing).

/** A token (RFC 9110 section 5.6.2), as a pattern's source. */
const TOKEN = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+";
/** Visible characters, spaces and tabs: no control character (a lone CR or LF among them). */
const TEXT = '[\\t\\x20-\\x7e\\x80-\\xff]';
/** A status line (RFC 9112 section 4): a status code of 100-599 (RFC 9110 section 15), any reason. */
const STATUS_LINE = new RegExp(`^HTTP/1\\.([01]) ([1-5]\\d\\d)(?: ${TEXT}*)?$`);
/**
 * A header or trailer line (RFC 9112 section 5): a token name right before its colon (whitespace
 * between them is to be rejected), then the value, whose optional whitespace around it `trimOws` drops.
 */
const FIELD_LINE = new RegExp(`^(${TOKEN}):(${TEXT}*)$`);
/** A `Keep-Alive` header's idle timeout in seconds (`timeout=5, max=100`). */
const KEEP_ALIVE_TIMEOUT = /(?:^|,)[\t ]*timeout=(\d{1,6})[\t ]*(?:,|$)/i;
/** The fields that frame a message. */
const FRAMING_FIELD = /^(?:content-length|transfer-encoding)$/i;
/**
 * A chunk's size line (RFC 9112 section 7.1): its size in hex (under 256 MiB, a bound past any answer
 * read here), then extensions without whitespace around `;` or `=` (as llhttp reads them), ignored.
 */
const CHUNK_SIZE_LINE = new RegExp(
  `^0*([0-9a-fA-F]{1,7})(?:;${TOKEN}(?:=(?:${TOKEN}|"(?:[\\t\\x20\\x21\\x23-\\x5b\\x5d-\\x7e\\x80-\\xff]|\\\\${TEXT})*"))?)*$`,
);

/** `text` without the spaces and tabs around it (a header value's optional whitespace; `trim` drops more). */
function trimOws(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && (text.charCodeAt(start) === 0x20 || text.charCodeAt(start) === 0x09)) start++;
  while (end > start && (text.charCodeAt(end - 1) === 0x20 || text.charCodeAt(end - 1) === 0x09)) end--;
  return start === 0 && end === text.length ? text : text.slice(start, end);
}

/** One socket and the exchange it carries, if any. */
interface Connection {
  socket: Socket;
  exchange: Exchange | undefined;
  /** When it may no longer be reused, by the wall clock (the server's keep-alive hint), if ever. */
  reuseUntil: number;
}

/**
 * Taken off a server's keep-alive hint (`Keep-Alive: timeout=5`): a socket is not reused in the last
 * second the server said it would keep it, when its close may be on its way.
 */
const KEEP_ALIVE_MARGIN_MS = 1_000;

/** What an exchange tells its caller: the head, then each piece of the body, then its end or failure. */
interface AnswerListener {
  /**
   * The head was read (`length`: its Content-Length, if any); returns what takes the body's pieces
   * (false: stop reading, the exchange is over), or why the answer is refused.
   */
  head(
    status: number,
    headers: Map<string, string>,
    length: number | undefined,
  ): ((piece: Buffer) => boolean) | string;
  complete(reusable: boolean): void;
  failed(error: Http1Error): void;
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
   * resolves with the whole answer; `timeLimitMs` (if finite) abandons the exchange, as `time-limit`.
   *
   * A kept-alive socket may have been closed by the server while it sat idle (an instance thawed after
   * minutes, say) without this process having read the close yet: if it fails before a byte of answer
   * arrives, the request goes again at once on a new connection, without the caller's backoff. The
   * request may have reached the server; the calls it carries are safe to repeat: reads, and a
   * settlement whose ClientRequestToken answers a repeat of a committed transaction as its success
   * without applying it again, and whose ledger entry must not exist yet
   * (test/integration/settlement-resend.test.ts).
   */
  post(head: string, body: string, timeLimitMs = Number.POSITIVE_INFINITY): Promise<Http1Answer> {
    return this.onSocket(timeLimitMs, true, (connection, limit) => this.whole(connection, head, body, limit));
  }

  /**
   * Sends `head` and `body` as `post` does and resolves with the answer's head once it is read; its
   * body goes to the sink `sinkFor` returns (called with the head, before any piece of the body, in
   * the same turn). `headLimitMs` bounds the wait for the head only: a body may take as long as its
   * reader allows (it aborts through the head). Unlike `post`, a kept-alive socket that fails before
   * any answer is not sent on again here: the request may have reached a server that acts on it (an
   * upstream that starts a generation), so whether to send it again is the caller's (its retries,
   * backoff and their count).
   *
   * Nothing that lives as long as the answer (its head, its exchange) holds the request: a request of
   * up to 6 MB (12 MB as a two-byte string) is not kept in memory for a whole generation.
   */
  open(
    head: string,
    body: string,
    headLimitMs: number,
    sinkFor: (head: Http1StreamHead) => Http1BodySink,
  ): Promise<Http1StreamHead> {
    return this.onSocket(headLimitMs, false, (connection, limit) =>
      this.streamed(connection, head, body, limit, sinkFor),
    );
  }

  /** Closes every idle socket (an exchange in progress ends by itself). */
  close(): void {
    for (const connection of this.idle.splice(0)) connection.socket.destroy();
  }

  /**
   * Runs `exchange` on an idle socket if there is one, else on a new one; with `resend`, again on a new
   * one if the idle one fails before any answer.
   */
  private async onSocket<T>(
    timeLimitMs: number,
    resend: boolean,
    exchange: (connection: Connection, timeLimitMs: number) => Promise<T>,
  ): Promise<T> {
    const started = Date.now();
    const reused = this.takeIdle();
    if (reused && !resend) return exchange(reused, timeLimitMs);
    if (reused) {
      try {
        return await exchange(reused, timeLimitMs);
      } catch (error) {
        if (!(error instanceof Http1Error && error.kind === 'network' && error.nothingRead)) throw error;
        this.close(); // the other idle sockets are as old
      }
    }
    const connection = await this.connect(timeLimitMs - (Date.now() - started));
    return exchange(connection, timeLimitMs - (Date.now() - started));
  }

  // `whole` and `streamed` make the answer's callbacks apart from the closures above, which hold the
  // request: a callback made inside them would keep it for as long as the answer lives.
  private whole(connection: Connection, head: string, body: string, limit: number): Promise<Http1Answer> {
    const answer = new WholeAnswer((reusable) => this.finish(connection, reusable));
    this.begin(connection, head, body, limit, answer);
    return answer.done;
  }

  private streamed(
    connection: Connection,
    head: string,
    body: string,
    limit: number,
    sinkFor: (head: Http1StreamHead) => Http1BodySink,
  ): Promise<Http1StreamHead> {
    const answer = new StreamedAnswer(connection, (reusable) => this.finish(connection, reusable), sinkFor);
    answer.exchange = this.begin(connection, head, body, limit, answer);
    return answer.opened;
  }

  /** Starts an exchange on `connection`: the request written in one piece, the answer to `listener`. */
  private begin(
    connection: Connection,
    head: string,
    body: string,
    timeLimitMs: number,
    listener: AnswerListener,
  ): Exchange {
    const exchange = new Exchange(listener, timeLimitMs);
    connection.exchange = exchange;
    connection.socket.setTimeout(this.timeouts.silenceMs);
    if (!startChannel.hasSubscribers) {
      connection.socket.write(head + body);
      return exchange;
    }
    const seen: Http1Exchange = { head, written: false, answered: false };
    exchange.onAnswered = () => {
      seen.answered = true;
    };
    connection.socket.write(head + body, () => {
      seen.written = true;
    });
    startChannel.publish(seen);
    return exchange;
  }

  /**
   * The exchange on `connection` is over: the socket goes back to the idle ones, or is closed. One whose
   * server said how long it keeps an idle connection (`Keep-Alive: timeout=N`, as node:http's agent
   * honours it) is reused only within that time, less a second, by the wall clock: an instance frozen
   * between invocations fires no timer, and a socket the server closed during the freeze would fail the
   * next call unanswered (which, for an upstream call, is not sent again).
   */
  private finish(connection: Connection, reusable: boolean): void {
    const hintMs = connection.exchange?.keepAliveHintMs();
    connection.exchange = undefined;
    connection.reuseUntil =
      hintMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + hintMs - KEEP_ALIVE_MARGIN_MS;
    if (reusable && connection.reuseUntil > Date.now()) this.release(connection);
    else connection.socket.destroy();
  }

  private takeIdle(): Connection | undefined {
    for (let connection = this.idle.pop(); connection; connection = this.idle.pop()) {
      if (connection.socket.destroyed || connection.socket.readyState !== 'open') continue;
      if (Date.now() >= connection.reuseUntil) {
        connection.socket.destroy();
        continue;
      }
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
    const connection: Connection = { socket, exchange: undefined, reuseUntil: Number.POSITIVE_INFINITY };
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
      const timer = setTimeout(
        () => {
          socket.destroy();
          reject(
            limit < this.timeouts.connectTimeoutMs
              ? new Http1Error('time-limit', 'time limit passed while connecting')
              : new Http1Error('connect-timeout', 'connection timed out'),
          );
        },
        Math.min(Math.max(0, limit), MAX_TIMER_MS),
      );
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

/** A whole answer, for `post`: its body gathered, bounded by MAX_BODY_BYTES. */
class WholeAnswer implements AnswerListener {
  readonly done: Promise<Http1Answer>;
  private resolve: (answer: Http1Answer) => void = () => {};
  private reject: (error: Http1Error) => void = () => {};
  private readonly pieces: Buffer[] = [];
  private total = 0;
  private status = 0;
  private date: string | undefined;

  constructor(private readonly finish: (reusable: boolean) => void) {
    this.done = new Promise<Http1Answer>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }

  head(
    status: number,
    headers: Map<string, string>,
    length: number | undefined,
  ): ((piece: Buffer) => boolean) | string {
    if (length !== undefined && length > MAX_BODY_BYTES) return 'answer too large';
    this.status = status;
    this.date = headers.get('date');
    return this.take;
  }

  private readonly take = (piece: Buffer): boolean => {
    this.pieces.push(piece);
    this.total += piece.length;
    return this.total <= MAX_BODY_BYTES;
  };

  complete(reusable: boolean): void {
    this.finish(reusable);
    const { pieces, total } = this;
    const bytes = pieces.length === 1 ? (pieces[0] as Buffer) : Buffer.concat(pieces, total);
    this.resolve({ status: this.status, date: this.date, body: bytes.toString('utf8') });
  }

  failed(error: Http1Error): void {
    this.finish(false);
    this.reject(error);
  }
}

/** A streamed answer, for `open`: resolved at its head, its body handed to the sink as it arrives. */
class StreamedAnswer implements AnswerListener {
  readonly opened: Promise<Http1StreamHead>;
  /** The exchange carrying this answer (set as it starts). */
  exchange: Exchange | undefined;
  private resolve: (head: Http1StreamHead) => void = () => {};
  private reject: (error: Http1Error) => void = () => {};
  private sink: Http1BodySink | undefined;

  constructor(
    private readonly connection: Connection,
    private readonly finish: (reusable: boolean) => void,
    private readonly sinkFor: (head: Http1StreamHead) => Http1BodySink,
  ) {
    this.opened = new Promise<Http1StreamHead>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }

  head(status: number, headers: Map<string, string>): (piece: Buffer) => boolean {
    const { connection } = this;
    const exchange = this.exchange as Exchange;
    exchange.clearTimeLimit();
    const head: Http1StreamHead = {
      status,
      headers,
      abort: () => {
        if (connection.exchange !== exchange) return;
        exchange.abandon();
        this.finish(false);
      },
    };
    const sink = this.sinkFor(head);
    this.sink = sink;
    this.resolve(head);
    return (piece) => {
      sink.piece(piece);
      return connection.exchange === exchange;
    };
  }

  complete(reusable: boolean): void {
    this.finish(reusable);
    this.sink?.end();
  }

  failed(error: Http1Error): void {
    this.finish(false);
    if (this.sink) this.sink.fail(error);
    else this.reject(error);
  }
}

/** Reads one answer from the bytes as they arrive, for its listener; ends once (complete or failed). */
class Exchange {
  /** The bytes before the end of the head (and any that came with it). */
  private head: Buffer = EMPTY;
  private status = 0;
  private readonly headers = new Map<string, string>();
  private keepAlive = true;
  /** The body's framing, once the head is read. */
  private body: BodyReader | undefined;
  /** Takes the body's pieces, once the head is read. */
  private take: ((piece: Buffer) => boolean) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private settled = false;
  /** An interim (1xx) answer was read and skipped. */
  private skippedInterim = false;
  /** Told of a complete answer before the caller is (for the diagnostics channel's record). */
  onAnswered: (() => void) | undefined;

  constructor(
    private readonly listener: AnswerListener,
    timeLimitMs: number,
  ) {
    if (Number.isFinite(timeLimitMs))
      this.timer = setTimeout(
        () => this.fail('time-limit', 'time limit passed'),
        // Node fires a timer of more than 2^31 - 1 ms after 1 ms instead: such a limit is no limit.
        Math.min(Math.max(0, timeLimitMs), MAX_TIMER_MS),
      );
  }

  /** The idle time the answer's `Keep-Alive: timeout=N` allows its connection, in ms, if it gave one. */
  keepAliveHintMs(): number | undefined {
    const hint = this.headers.get('keep-alive');
    const seconds = hint === undefined ? undefined : KEEP_ALIVE_TIMEOUT.exec(hint)?.[1];
    return seconds === undefined ? undefined : Number(seconds) * 1_000;
  }

  /** The caller's time limit no longer applies (a streamed answer's head has arrived). */
  clearTimeLimit(): void {
    clearTimeout(this.timer);
  }

  /** The caller gave up on the exchange: nothing more is read or reported. */
  abandon(): void {
    this.settled = true;
    clearTimeout(this.timer);
  }

  read(chunk: Buffer): void {
    if (this.settled) return;
    if (!this.body) {
      this.head = this.head.length === 0 ? chunk : Buffer.concat([this.head, chunk]);
      const rest = this.readHead();
      if (rest === undefined || this.settled) return;
      chunk = rest;
    }
    const state = (this.body as BodyReader).push(chunk, this.take as (piece: Buffer) => boolean);
    if (this.settled) return;
    if (state === 'done') this.complete(this.keepAlive);
    // The answer is whole; what came after it is not an answer to anything sent, so the socket is
    // dropped (as bytes arriving after the answer in a later packet drop it).
    else if (state === 'done-extra') this.complete(false);
    else if (state !== 'more') this.fail('protocol', state);
  }

  /** The peer ended its side: an answer framed by the connection's end is complete. */
  ended(): void {
    if (this.settled) return;
    if (this.body instanceof CloseBody) this.complete(false);
    else this.fail('network', 'connection ended before the answer did');
  }

  fail(kind: Http1FailureKind, message: string, cause?: Error): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    const nothingRead = this.body === undefined && this.head.length === 0 && !this.skippedInterim;
    this.listener.failed(new Http1Error(kind, message, { ...(cause ? { cause } : {}), nothingRead }));
  }

  private complete(reusable: boolean): void {
    this.settled = true;
    clearTimeout(this.timer);
    this.onAnswered?.();
    this.listener.complete(reusable);
  }

  /**
   * Reads the status line and headers and chooses the body's framing: the bytes after the head, or
   * undefined while the head is incomplete (or failed). Interim (1xx) answers are skipped.
   */
  private readHead(): Buffer | undefined {
    for (;;) {
      const end = this.head.indexOf(HEAD_END);
      if (end < 0) {
        if (this.head.length > MAX_HEAD_BYTES) this.fail('protocol', 'answer head too large');
        return undefined;
      }
      if (end > MAX_HEAD_BYTES) {
        this.fail('protocol', 'answer head too large');
        return undefined;
      }
      const lines = this.head.toString('latin1', 0, end).split('\r\n');
      const rest = this.head.subarray(end + HEAD_END.length);
      const status = STATUS_LINE.exec(lines[0] ?? '');
      if (!status) {
        this.fail('protocol', 'not an HTTP/1.1 answer');
        return undefined;
      }
      this.status = Number(status[2]);
      // An HTTP/1.0 server closes the connection after its answer unless it says otherwise: such a
      // socket is not reused (a request sent on it as it closes would fail unanswered).
      if (status[1] === '0') this.keepAlive = false;
      // Nothing here asks to switch protocols: a 101 is not an answer to this request.
      if (this.status === 101) {
        this.fail('protocol', 'unrequested protocol switch');
        return undefined;
      }
      const problem =
        status[1] === '0' && this.status < 200 ? 'an interim answer in HTTP/1.0' : this.readHeaders(lines);
      if (problem) {
        this.fail('protocol', problem);
        return undefined;
      }
      if (this.status < 200) {
        // Skipped (its headers read all the same, as Node's parser reads them): the answer follows it.
        this.headers.clear();
        this.head = rest;
        this.skippedInterim = true;
        continue;
      }
      this.head = EMPTY;
      const take = this.listener.head(
        this.status,
        this.headers,
        this.body instanceof LengthBody ? this.body.length : undefined,
      );
      if (typeof take === 'string') {
        this.fail('protocol', take);
        return undefined;
      }
      this.take = take;
      return rest;
    }
  }

  /** Reads the headers and sets a final answer's framing; a problem's description if any. */
  private readHeaders(lines: string[]): string | undefined {
    const { headers } = this;
    for (let i = 1; i < lines.length; i++) {
      const field = FIELD_LINE.exec(lines[i] as string);
      if (!field) return 'malformed header line';
      const name = (field[1] as string).toLowerCase();
      const value = trimOws(field[2] as string);
      const earlier = headers.get(name);
      headers.set(name, earlier === undefined ? value : `${earlier}, ${value}`);
    }
    // One length (a repeated one, even if it agrees, is refused: RFC 9112 section 6.3 allows that, and
    // Node's parser does it).
    const length = headers.get('content-length');
    if (length !== undefined && !/^\d{1,9}$/.test(length)) return 'invalid content-length';
    const announced = length === undefined ? undefined : Number(length);
    // Chunked is the one transfer coding read here (nothing asks for another, and one it cannot undo
    // would hand on bytes no reader above can read); with a length beside it, the answer is refused, as
    // RFC 9112 section 6.1 advises and Node's parser does (how responses are split and smuggled).
    const encoding = headers.get('transfer-encoding');
    const chunked = encoding !== undefined && encoding.toLowerCase() === 'chunked';
    if (encoding !== undefined && !chunked) return `unsupported transfer-encoding ${encoding.slice(0, 40)}`;
    if (chunked && announced !== undefined) return 'both a length and chunked framing';
    const connection = headers.get('connection');
    if (
      connection
        ?.toLowerCase()
        .split(',')
        .some((token) => token.trim() === 'close')
    ) {
      // The connection ends with this answer: no final answer can follow an interim one.
      if (this.status < 200) return 'an interim answer closing the connection';
      this.keepAlive = false;
    }
    if (this.status < 200) return undefined;
    // RFC 9112 section 6.3: no body after 204 or 304.
    if (this.status === 204 || this.status === 304) this.body = new LengthBody(0);
    else if (chunked) this.body = new ChunkedBody();
    else if (announced !== undefined) this.body = new LengthBody(announced);
    else {
      this.body = new CloseBody();
      this.keepAlive = false;
    }
    return undefined;
  }
}

/**
 * 'more' until the body is complete, 'done' then ('done-extra': complete, and the bytes it came with
 * went on past it, which belong to no answer asked for), or what is wrong with it.
 */
type BodyState = 'more' | 'done' | 'done-extra' | (string & {});

/**
 * A body's framing: `push` hands the body's own bytes in each piece of the connection to `take`
 * (which returns false once the exchange is over, or its bound passed) and says where the body stands.
 */
interface BodyReader {
  push(chunk: Buffer, take: (piece: Buffer) => boolean): BodyState;
}

/** A body of `Content-Length` bytes. */
class LengthBody implements BodyReader {
  private received = 0;

  constructor(readonly length: number) {}

  push(chunk: Buffer, take: (piece: Buffer) => boolean): BodyState {
    if (chunk.length === 0) return this.received === this.length ? 'done' : 'more';
    const wanted = this.length - this.received;
    const own = chunk.length > wanted ? chunk.subarray(0, wanted) : chunk;
    this.received += own.length;
    if (own.length > 0 && !take(own)) return 'answer too large';
    if (own !== chunk) return 'done-extra';
    return this.received === this.length ? 'done' : 'more';
  }
}

/** A body that ends with the connection. */
class CloseBody implements BodyReader {
  push(chunk: Buffer, take: (piece: Buffer) => boolean): BodyState {
    return chunk.length === 0 || take(chunk) ? 'more' : 'answer too large';
  }
}

/** A chunked body (RFC 9112 section 7.1), read as it arrives; chunk extensions and trailers are ignored. */
export class ChunkedBody implements BodyReader {
  /** Bytes of a size line, chunk end or trailer not yet complete. */
  private pending: Buffer = EMPTY;
  private state: 'size' | 'data' | 'data-end' | 'trailers' | 'done' = 'size';
  private remaining = 0;
  /** Bytes of trailer lines so far: a header block, bounded as a head is (64 KiB in all). */
  private trailerBytes = 0;

  push(chunk: Buffer, take: (piece: Buffer) => boolean): BodyState {
    if (this.state === 'done') return chunk.length === 0 ? 'done' : 'done-extra';
    let bytes = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    this.pending = EMPTY;
    for (;;) {
      if (this.state === 'data') {
        if (bytes.length === 0) return 'more';
        const data = bytes.length <= this.remaining ? bytes : bytes.subarray(0, this.remaining);
        if (!take(data)) return 'answer too large';
        this.remaining -= data.length;
        bytes = bytes.subarray(data.length);
        if (this.remaining > 0) return 'more';
        this.state = 'data-end';
      } else if (this.state === 'data-end') {
        if (bytes.length < CRLF.length) {
          this.pending = bytes;
          return 'more';
        }
        if (bytes[0] !== 0x0d || bytes[1] !== 0x0a) return 'malformed chunked body';
        bytes = bytes.subarray(CRLF.length);
        this.state = 'size';
      } else {
        const lineEnd = bytes.indexOf(CRLF);
        if (lineEnd < 0) {
          if (bytes.length > MAX_HEAD_BYTES) return 'malformed chunked body';
          this.pending = bytes;
          return 'more';
        }
        const line = bytes.toString('latin1', 0, lineEnd);
        bytes = bytes.subarray(lineEnd + CRLF.length);
        if (this.state === 'trailers') {
          this.trailerBytes += lineEnd + CRLF.length;
          if (this.trailerBytes > MAX_HEAD_BYTES) return 'trailers too large';
          if (line.length > 0) {
            // Framing has no place after the body (RFC 9110 section 6.5.1); Node's parser checks it there too.
            const field = FIELD_LINE.exec(line);
            if (!field || FRAMING_FIELD.test(field[1] as string)) return 'malformed chunked body';
            continue;
          }
          this.state = 'done';
          return bytes.length === 0 ? 'done' : 'done-extra';
        }
        const size = CHUNK_SIZE_LINE.exec(line);
        if (!size) return 'malformed chunked body';
        this.remaining = Number.parseInt(size[1] as string, 16);
        this.state = this.remaining === 0 ? 'trailers' : 'data';
      }
    }
  }
}
