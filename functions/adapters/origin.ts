/**
 * The kept-alive connections to one origin (an upstream's, DynamoDB's) for the request path's outbound
 * calls, on Node's own HTTP client (`node:http`, `node:https` and a keep-alive `Agent`): no bundle
 * bytes (the undici it replaced was about 520 KiB of every function bundle, parsed by every cold
 * start). A connection gets `connectTimeoutMs` (TLS handshake included); an answer's head
 * 64 KiB (`maxHeaderSize`; Node's own server takes 16 KiB) and, when given, its whole body
 * `maxResponseBytes`; the callers bound the waits for the head and the body's silences themselves. A socket is reused only after
 * a complete answer that did not say `Connection: close` (Node's agent); one that sends bytes while
 * idle (nobody asked for them) is dropped; TLS certificates and host names are checked as Node does
 * and its sessions resumed (the agent's session cache); a server's `Keep-Alive: timeout=N` is honoured
 * (less `KEEP_ALIVE_MARGIN_MS`) with the idle socket's timer.
 *
 * An instance frozen between invocations fires no timer, so the hint is also kept by the wall clock:
 * once the last answer's hint has run out, the next call gets a new agent (the old one closes its idle
 * sockets and lets calls in progress finish, their sockets closed after them), instead of a socket the
 * server may have closed during the freeze. An answer without a hint leaves its socket kept
 * (`IDLE_WITHOUT_HINT_MS`).
 */
import type { Agent, ClientRequest, IncomingHttpHeaders, IncomingMessage } from 'node:http';
import * as http from 'node:http';
import * as https from 'node:https';
import type { Socket } from 'node:net';

/** Taken off a server's keep-alive hint: a socket is not reused in the last second the server gave. */
const KEEP_ALIVE_MARGIN_MS = 1_000;
/** An idle socket without a hint is kept this long (as undici's `keepAliveMaxTimeout` default was). */
const IDLE_WITHOUT_HINT_MS = 600_000;
const MAX_HEADER_BYTES = 64 * 1024;
/** A `Keep-Alive` header's idle timeout in seconds (`timeout=5, max=100`). */
const KEEP_ALIVE_TIMEOUT = /(?:^|,)[\t ]*timeout=(\d{1,6})[\t ]*(?:,|$)/i;

/** The codes of the failures this module names itself (Node's own keep theirs: ECONNRESET, HPE_...). */
export const CONNECT_TIMEOUT = 'ERR_CONNECT_TIMEOUT';
const ANSWER_TOO_LARGE = 'ERR_ANSWER_TOO_LARGE';

export interface OriginOptions {
  connectTimeoutMs: number;
  /** A whole answer larger than this fails; none when left out. */
  maxResponseBytes?: number;
  /** Certificates trusted instead of Node's (a test's own server). */
  ca?: string;
}

/** One request of an exchange. */
export interface ExchangeRequest {
  path: string;
  method: 'GET' | 'POST';
  /** Sent in this order, after `host` and `connection: keep-alive` (unless given here). */
  headers?: Record<string, string>;
  /** Written whole and let go of (a 6 MB prompt's JSON is not kept while a stream is relayed). */
  body?: string | Buffer;
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

/** A failure named here, with a code as Node names its own. */
function failure(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/** An idle kept-alive socket's listener: bytes nobody asked for drop it. */
function strayBytes(this: Socket): void {
  this.destroy();
}

export class Origin {
  readonly #secure: boolean;
  readonly #hostname: string;
  readonly #port: number | undefined;
  /** `host:port` as the `host` header says it (the port left out when it is the scheme's). */
  readonly #host: string;
  #agent: Agent;
  /** When the last answer's keep-alive hint runs out, by the wall clock. */
  #reuseUntil = Number.POSITIVE_INFINITY;

  constructor(
    readonly url: string,
    private readonly options: OriginOptions,
  ) {
    const parsed = new URL(url);
    this.#secure = parsed.protocol === 'https:';
    this.#hostname = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
    this.#port = parsed.port ? Number(parsed.port) : undefined;
    this.#host = parsed.host;
    this.#agent = this.#newAgent();
  }

  /** An answer arrived with these `Keep-Alive` header values (if any): its hint starts now. */
  answered(keepAlive: string | string[] | undefined): void {
    const seconds = keepAliveSeconds(keepAlive);
    this.#reuseUntil =
      seconds === undefined ? Number.POSITIVE_INFINITY : Date.now() + seconds * 1_000 - KEEP_ALIVE_MARGIN_MS;
  }

  /** Closes the idle sockets; calls in progress finish, and their sockets close after them. */
  close(): Promise<void> {
    retire(this.#agent);
    return Promise.resolve();
  }

  /**
   * Sends one request, its answer to `sink`, and returns what aborts it: the sink hears the reason at
   * once, even while the request still waits for its socket. Informational (1xx) heads are skipped.
   * Through the request's and the answer's own events, not a stream pipeline or an AbortSignal: on
   * the request path's DynamoDB read and settlement those would be most of the client's CPU.
   */
  exchange(request: ExchangeRequest, sink: ExchangeSink): (reason: Error) => void {
    const agent = this.#current();
    const { connectTimeoutMs, maxResponseBytes, ca } = this.options;
    let over = false;
    const finish = () => {
      const first = !over;
      over = true;
      return first;
    };
    let response: IncomingMessage | undefined;
    let connecting: NodeJS.Timeout | undefined;
    const fail = (error: Error) => {
      clearTimeout(connecting);
      if (!req.destroyed) req.destroy();
      if (finish()) sink.fail(error);
    };
    const options: https.RequestOptions = {
      host: this.#hostname,
      method: request.method,
      path: request.path,
      headers: { host: this.#host, connection: 'keep-alive', ...request.headers },
      agent,
      maxHeaderSize: MAX_HEADER_BYTES,
      ...(this.#port !== undefined ? { port: this.#port } : {}),
      ...(ca ? { ca } : {}),
    };
    const req: ClientRequest = this.#secure ? https.request(options) : http.request(options);
    // A connection being made has connectTimeoutMs (its TLS handshake included); a kept-alive one
    // taken from the pool needs no timer (the warm path sets none).
    req.on('socket', (socket: Socket) => {
      if (!socket.connecting) return;
      connecting = setTimeout(
        () => fail(failure(CONNECT_TIMEOUT, `no connection within ${connectTimeoutMs} ms`)),
        connectTimeoutMs,
      );
      socket.once(this.#secure ? 'secureConnect' : 'connect', () => clearTimeout(connecting));
    });
    // A fault under the answer (a reset, a broken chunk): the pieces parsed before it, still in the
    // answer's buffer, go to the sink first (read() hands each to the data listener).
    const faulted = (error: Error) => {
      if (response && !over) while (response.read() !== null);
      fail(error);
    };
    req.on('error', faulted);
    req.on('close', () => {
      if (!over) faulted(failure('ECONNRESET', 'the connection closed before the answer ended'));
    });
    req.on('response', (res: IncomingMessage) => {
      clearTimeout(connecting);
      // The answer's keep-alive hint, for the agent deciding whether to keep its socket (newAgent).
      hintBySocket.set(res.socket, res.headers['keep-alive']);
      res.on('error', faulted);
      if (over) return;
      response = res;
      let received = 0;
      res.on('data', (bytes: Buffer) => {
        if (over) return;
        received += bytes.byteLength;
        if (maxResponseBytes !== undefined && received > maxResponseBytes)
          return fail(failure(ANSWER_TOO_LARGE, `answer larger than ${maxResponseBytes} bytes`));
        sink.piece(bytes);
      });
      res.on('end', () => {
        if (finish()) sink.end();
      });
      sink.head(res.statusCode ?? 0, res.headers);
    });
    req.end(request.body);
    return (reason) => {
      if (over) return;
      fail(reason);
    };
  }

  /** The agent for the next call. */
  #current(): Agent {
    if (Date.now() >= this.#reuseUntil) {
      retire(this.#agent);
      this.#agent = this.#newAgent();
      this.#reuseUntil = Number.POSITIVE_INFINITY;
    }
    return this.#agent;
  }

  #newAgent(): Agent {
    const agent = this.#secure
      ? new https.Agent({ keepAlive: true, scheduling: 'lifo' })
      : new http.Agent({ keepAlive: true, scheduling: 'lifo' });
    // Node's own keeps a hint only below the agent's timeout (none here), and reads it only first in
    // the header: the idle socket's timer is the hint less the margin, or IDLE_WITHOUT_HINT_MS.
    agent.keepSocketAlive = (socket: Socket) => {
      if (retired.has(agent)) return false;
      const seconds = keepAliveSeconds(hintBySocket.get(socket));
      const idleMs = seconds === undefined ? IDLE_WITHOUT_HINT_MS : seconds * 1_000 - KEEP_ALIVE_MARGIN_MS;
      if (idleMs <= 0) return false;
      socket.setKeepAlive(true, 1_000);
      socket.unref();
      // Set once while it stays the same (the socket's activity restarts it): a timer less per request.
      if (socket.timeout !== idleMs) socket.setTimeout(idleMs);
      socket.on('data', strayBytes);
      return true;
    };
    const reuse = agent.reuseSocket.bind(agent);
    agent.reuseSocket = (socket: Socket, req: ClientRequest) => {
      socket.removeListener('data', strayBytes);
      reuse(socket, req);
    };
    return agent;
  }
}

/** Agents no longer handed out: their sockets close once idle. */
const retired = new WeakSet<Agent>();

function retire(agent: Agent): void {
  retired.add(agent);
  for (const sockets of Object.values(agent.freeSockets))
    for (const socket of sockets ?? []) socket.destroy();
}

/** The `Keep-Alive` header of the last answer each socket carried (public: the response's own headers and socket). */
const hintBySocket = new WeakMap<Socket, string | string[] | undefined>();

function keepAliveSeconds(keepAlive: string | string[] | undefined): number | undefined {
  const value = Array.isArray(keepAlive) ? keepAlive.join(', ') : keepAlive;
  const seconds = value === undefined ? undefined : KEEP_ALIVE_TIMEOUT.exec(value)?.[1];
  return seconds === undefined ? undefined : Number(seconds);
}
