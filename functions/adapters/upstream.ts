import { BadRequestError, UpstreamError } from '../core/errors.js';
import type { UpstreamTarget } from '../core/tiers.js';
import { CONNECT_TIMEOUT, Origin } from './origin.js';
import { openStream, type StreamedAnswer, type UpstreamBody } from './upstream-body.js';
import { UpstreamEvents } from './upstream-events.js';

/**
 * Calls OpenAI-compatible upstreams over Node's HTTP client (origin.ts), kept-alive sockets per
 * upstream origin at module scope, so connections live across warm invocations. The body is handed
 * on as it arrives, in an UpstreamBody, so that nothing received before a fault is lost. An upstream's response is untrusted input (OWASP API10):
 * redirects are never followed, bodies are bounded by the caller, and upstream error text never
 * reaches the client except a 400's message, which is about the caller's own input.
 *
 * Resilience before the first byte: each target gets a few attempts (connection errors, timeouts,
 * 429 and 5xx are retried with exponential backoff and full jitter, honouring Retry-After), then
 * the tier's next target; all within a total budget. Nothing is retried once a byte has gone to the
 * client: this module only ever returns a response whose status was 2xx.
 */

export interface RetryPolicy {
  /** Attempts per target. */
  attemptsPerTarget: number;
  /** First backoff; doubles each attempt, with full jitter. */
  baseDelayMs: number;
  /** Longest single wait, Retry-After included. */
  maxDelayMs: number;
  /** No response status within this, per attempt: that attempt failed. */
  firstByteTimeoutMs: number;
}

export interface FallbackCall {
  targets: readonly UpstreamTarget[];
  /** The request body for a target (its own model id). */
  bodyFor: (target: UpstreamTarget) => Record<string, unknown>;
  credential: (name: string | undefined) => Promise<string | undefined>;
  policy: RetryPolicy;
  /** A reply body larger than this is an upstream failure (untrusted input, OWASP API10). */
  maxBytes: number;
  /** Epoch ms after which no new attempt starts (the function's timeout minus settlement room). */
  deadline: number;
  /** Called for each failed attempt (for logs); never given a credential. */
  onAttemptFailed?: (info: { target: string; attempt: number; reason: string }) => void;
}

/**
 * What an upstream answered: its status, headers and body as a web stream, as a fetch `Response` has
 * them. Not a `Response` itself: constructing one (or `Headers`) loads Node's own copy of undici
 * (its fetch), 8-11 ms of a cold start that nothing else here needs.
 */
interface UpstreamResponse {
  readonly status: number;
  /** A 2xx status. */
  readonly ok: boolean;
  readonly headers: { get(name: string): string | null };
  readonly body: UpstreamBody | null;
}

/** An upstream that answered 2xx: a JSON reply's body, or a stream request's events (first one judged). */
export type OpenedUpstream = {
  target: UpstreamTarget;
  /** Aborts the underlying request (used on idle timeouts). */
  abort(): void;
} & ({ stream: false; body: UpstreamBody } | { stream: true; events: UpstreamEvents });

/** The upstream did not answer before the call's deadline (the JSON reply's 504). */
export class UpstreamDeadlineError extends UpstreamError {}

/** A failed attempt: whether another attempt may help, and how long the upstream asked us to wait. */
class AttemptFailure extends Error {
  constructor(
    readonly reason: string,
    readonly retryable: boolean,
    readonly retryAfterMs?: number,
  ) {
    super(reason);
  }
}

export async function openWithFallback(call: FallbackCall): Promise<OpenedUpstream> {
  let lastCause: unknown;
  for (const target of call.targets) {
    const apiKey = await call.credential(target.credential);
    for (let attempt = 1; attempt <= call.policy.attemptsPerTarget; attempt++) {
      const remaining = call.deadline - Date.now();
      if (remaining <= 0)
        throw new UpstreamError(undefined, { cause: lastCause ?? new Error('upstream budget spent') });
      try {
        return await attemptOnce(
          target,
          apiKey,
          call.bodyFor(target),
          Math.min(call.policy.firstByteTimeoutMs, remaining),
          call.maxBytes,
        );
      } catch (error) {
        if (error instanceof BadRequestError) throw error;
        const failure =
          error instanceof AttemptFailure ? error : new AttemptFailure('unexpected error', false);
        lastCause = error;
        call.onAttemptFailed?.({ target: hostOf(target), attempt, reason: failure.reason });
        // An attempt cut by the call's own deadline: no later one can start. Said as such, not read
        // off the wall clock afterwards (a timer may fire within a millisecond of Date.now's deadline).
        if (failure.reason === 'timeout' && remaining <= call.policy.firstByteTimeoutMs)
          throw new UpstreamDeadlineError(undefined, { cause: error });
        if (!failure.retryable || attempt === call.policy.attemptsPerTarget) break;
        const backoff =
          Math.random() * Math.min(call.policy.maxDelayMs, call.policy.baseDelayMs * 2 ** (attempt - 1));
        const wait = Math.min(call.policy.maxDelayMs, Math.max(backoff, failure.retryAfterMs ?? 0));
        if (Date.now() + wait >= call.deadline) break;
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }
  throw new UpstreamError(undefined, { cause: lastCause });
}

/** Statuses whose response carries no body. */
const NULL_BODY = new Set([204, 205, 304]);

/** Waiting for a connection to an upstream; the attempt's first-byte timeout bounds it too. */
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * Each upstream's chat completions address, parsed once (a URL parsed for every call was about 20 us
 * of a JSON request's CPU in a V8 profile of the completions function), with the connections to its
 * origin. Kept for every base URL the calls name, which are the tier configuration's (read once at
 * cold start), so one entry per configured target; a target left out of the map would get a new
 * agent, and new sockets left open, on every call.
 */
interface RequestTarget {
  origin: Origin;
  path: string;
}
const REQUEST_TARGETS = new Map<string, RequestTarget>();
function requestTarget(baseUrl: string): RequestTarget {
  let target = REQUEST_TARGETS.get(baseUrl);
  if (!target) {
    const url = new URL(`${baseUrl}/chat/completions`);
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new AttemptFailure(`unsupported upstream protocol ${url.protocol}`, false);
    target = {
      origin: new Origin(url.origin, { connectTimeoutMs: CONNECT_TIMEOUT_MS }),
      path: `${url.pathname}${url.search}`,
    };
    REQUEST_TARGETS.set(baseUrl, target);
  }
  return target;
}

/**
 * A credential as a header carries it: visible ASCII and spaces only. A secret with a line break
 * (pasted with its newline, say) would otherwise split the request's head (Node refuses it too).
 */
const HEADER_VALUE = /^[\x20-\x7e]*$/;

/**
 * POSTs a JSON body; resolves when the response status and headers arrive, within `timeoutMs`
 * (connecting included), the body arriving into an UpstreamBody (openStream). A body has no silence
 * limit here (`bodyTimeout: 0`): a reasoning model may think for a minute between
 * events, and the relay judges its pauses.
 */
async function post(
  baseUrl: string,
  apiKey: string | undefined,
  body: string,
  stream: boolean,
  timeoutMs: number,
  maxBytes: number,
): Promise<{ response: UpstreamResponse; abort: () => void }> {
  if (apiKey !== undefined && !HEADER_VALUE.test(apiKey))
    throw new AttemptFailure('the upstream credential has characters a header cannot carry', false);
  const { origin, path } = requestTarget(baseUrl);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: stream ? 'text/event-stream' : 'application/json',
  };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  const sent = Buffer.from(body);
  headers['content-length'] = String(sent.length);
  const opened = openStream(
    origin,
    // Written whole and let go of: a 6 MB prompt's JSON is not kept while a stream is relayed.
    { path, method: 'POST', headers, body: sent },
    maxBytes,
    ({ headers: answered }) => origin.answered(answered['keep-alive']),
  );
  const timer = setTimeout(() => opened.abort(new AttemptFailure('timeout', true)), Math.max(0, timeoutMs));
  let answer: StreamedAnswer;
  try {
    answer = await opened.answer;
  } catch (error) {
    if ((error as { code?: string }).code === CONNECT_TIMEOUT) throw new AttemptFailure('timeout', true);
    throw error;
  } finally {
    clearTimeout(timer);
  }
  const { status, headers: answered, body: received } = answer;
  return {
    response: {
      status,
      ok: status >= 200 && status < 300,
      headers: { get: (name) => headerValue(answered[name.toLowerCase()]) },
      body: NULL_BODY.has(status) ? null : received,
    },
    abort: () => received.cancel(),
  };
}

/** A header's value as fetch's `Headers` gives it: a repeated one's values joined with ", ". */
function headerValue(value: string | string[] | undefined): string | null {
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(', ') : value;
}

async function attemptOnce(
  target: UpstreamTarget,
  apiKey: string | undefined,
  body: Record<string, unknown>,
  timeoutMs: number,
  maxBytes: number,
): Promise<OpenedUpstream> {
  const attemptDeadline = Date.now() + timeoutMs;
  let opened: { response: UpstreamResponse; abort: () => void };
  try {
    opened = await post(
      target.baseUrl,
      apiKey,
      JSON.stringify(body),
      body.stream === true,
      timeoutMs,
      maxBytes,
    );
  } catch (error) {
    if (error instanceof AttemptFailure) throw error;
    // What failed, for the operator's log line: a refused certificate, a reset, an answer that is not
    // HTTP/1.1 as Node reads it (Node's code and words, bounded).
    const code = (error as { code?: unknown })?.code;
    const why = `${typeof code === 'string' ? `${code}: ` : ''}${(error as Error)?.message ?? String(error)}`;
    throw new AttemptFailure(`connection failed (${why.slice(0, 200)})`, true);
  }
  const { response } = opened;
  // Redirects are never followed: a 3xx is simply not a success (OWASP API10).
  if (response.ok) {
    if (!response.body) {
      opened.abort();
      throw new AttemptFailure(`HTTP ${response.status} without a body`, false);
    }
    if (!body.stream) return { stream: false, body: response.body, target, abort: opened.abort };
    try {
      const events = await checkEventStream(response, response.body, attemptDeadline);
      return { stream: true, events, target, abort: opened.abort };
    } catch (error) {
      opened.abort();
      throw error;
    }
  }
  const status = response.status;
  if (status === 400) {
    const message = await readErrorMessage(response, attemptDeadline);
    if (message) throw new BadRequestError(message, null, 'upstream_rejected_request');
  } else {
    response.body?.cancel();
    opened.abort();
  }
  const retryable = status === 408 || status === 409 || status === 429 || status >= 500;
  throw new AttemptFailure(`HTTP ${status}`, retryable, retryAfterMs(response.headers.get('retry-after')));
}

/**
 * A stream request's 2xx must be an event stream whose first event is a chat-completion chunk (or an SSE
 * comment, as OpenRouter sends while it waits). An HTML page, a JSON body or an error event in its place
 * is a failed attempt, known before any byte goes to the client, so it is retried, falls back, or ends
 * as a 502 with nothing charged. The first event is awaited until the attempt's first-byte deadline;
 * an event stream still silent then is committed to (a slow first token is not a fault). Returns the
 * events, the judged one still first among them.
 */
async function checkEventStream(
  response: UpstreamResponse,
  body: UpstreamBody,
  deadline: number,
): Promise<UpstreamEvents> {
  const type = response.headers.get('content-type') ?? '';
  if (!/^text\/event-stream\b/i.test(type.trim())) {
    body.cancel();
    throw new AttemptFailure(`not an event stream (${type.slice(0, 40) || 'no content type'})`, false);
  }
  const events = new UpstreamEvents(body, FIRST_EVENT_MAX_BYTES);
  const first = await events.peek(deadline);
  // A live event stream that is still thinking (a reasoning model's first token can take a minute):
  // commit to it, and let the relay's keep-alives hold the client from here.
  if (first === 'timeout' || first === 'comment') return events;
  const verdict = judgeFirstEvent(first);
  if (verdict === 'ok') return events;
  events.cancel();
  throw verdict;
}

/** The largest single event the gateway takes; a first event this large is a failed attempt. */
const FIRST_EVENT_MAX_BYTES = 1024 * 1024;

function judgeFirstEvent(first: Exclude<Awaited<ReturnType<UpstreamEvents['peek']>>, 'timeout' | 'comment'>) {
  switch (first.kind) {
    case 'chunk':
      return 'ok';
    case 'error':
      return new AttemptFailure('error event', true);
    case 'lost':
      return new AttemptFailure('connection lost before the first event', true);
    case 'end':
      return new AttemptFailure('event stream ended before its first event', true);
    case 'done':
      return new AttemptFailure('event stream ended before its first chunk', true);
    case 'malformed':
      return new AttemptFailure(`first event is not a chat completion chunk (${first.reason})`, false);
  }
}

/** Retry-After as seconds or an HTTP date. */
function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

function hostOf(target: UpstreamTarget): string {
  try {
    return new URL(target.baseUrl).host;
  } catch {
    return 'unknown';
  }
}

/** The body did not arrive completely before the caller's deadline. */
export class BodyDeadlineError extends Error {
  constructor() {
    super('upstream body not complete before the deadline');
    this.name = 'BodyDeadlineError';
  }
}

/**
 * Reads a body as text; a body larger than its bound (the UpstreamBody's, or `maxBytes` here) is an
 * upstream failure (thrown), never a memory problem. With a deadline (epoch ms), a body still arriving
 * then is a BodyDeadlineError. The rest of the body is not read.
 */
export async function readBody(body: UpstreamBody, deadline?: number, maxBytes = Number.POSITIVE_INFINITY) {
  const parts: Buffer[] = [];
  let size = 0;
  try {
    for (;;) {
      const next = await body.read(deadline === undefined ? undefined : deadline - Date.now());
      if (next === 'timeout') throw new BodyDeadlineError();
      if (next === null) break;
      size += next.byteLength;
      if (size > maxBytes) throw new Error(`upstream body larger than ${maxBytes} bytes`);
      parts.push(next);
    }
  } catch (error) {
    body.cancel();
    throw error;
  }
  return Buffer.concat(parts).toString('utf8');
}

/** The `error.message` of an OpenAI-shaped error body of at most 16 KiB; undefined otherwise. */
async function readErrorMessage(response: UpstreamResponse, deadline: number): Promise<string | undefined> {
  if (!response.body) return undefined;
  try {
    const parsed = JSON.parse(await readBody(response.body, deadline, 16_384)) as {
      error?: { message?: unknown };
    };
    const message = parsed.error?.message;
    return typeof message === 'string' ? message.slice(0, 1_000) : undefined;
  } catch {
    return undefined;
  }
}
