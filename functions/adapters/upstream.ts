import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { Readable } from 'node:stream';
import { createParser } from 'eventsource-parser';
import { BadRequestError, UpstreamError } from '../core/errors.js';
import type { UpstreamTarget } from '../core/tiers.js';

/**
 * Calls OpenAI-compatible upstreams over node:http(s) with module-scope keep-alive agents, so
 * connections live across warm invocations. (node:http measured 0.64 ms of CPU per streamed call
 * against 1.06 ms for the global fetch, 500 calls each; the body is handed on as a web stream, in an
 * UpstreamResponse.) An upstream's response is untrusted input
 * (OWASP API10): redirects are never followed, bodies are bounded by the caller, and upstream error
 * text never reaches the client except a 400's message, which is about the caller's own input.
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
  /** Epoch ms after which no new attempt starts (the function's timeout minus settlement room). */
  deadline: number;
  /** Called for each failed attempt (for logs); never given a credential. */
  onAttemptFailed?: (info: { target: string; attempt: number; reason: string }) => void;
}

/**
 * What an upstream answered: its status, headers and body as a web stream, as a fetch `Response` has
 * them. Not a `Response` itself: constructing one (or `Headers`) loads undici, 8-11 ms of a cold
 * start that nothing else here needs.
 */
export interface UpstreamResponse {
  readonly status: number;
  /** A 2xx status. */
  readonly ok: boolean;
  readonly headers: { get(name: string): string | null };
  readonly body: ReadableStream<Uint8Array> | null;
}

export interface OpenedUpstream {
  response: UpstreamResponse;
  target: UpstreamTarget;
  /** Aborts the underlying request (used on idle timeouts). */
  abort(): void;
}

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
        );
      } catch (error) {
        if (error instanceof BadRequestError) throw error;
        const failure =
          error instanceof AttemptFailure ? error : new AttemptFailure('unexpected error', false);
        lastCause = error;
        call.onAttemptFailed?.({ target: hostOf(target), attempt, reason: failure.reason });
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

const agents = {
  'http:': new HttpAgent({ keepAlive: true, maxSockets: 256 }),
  'https:': new HttpsAgent({ keepAlive: true, maxSockets: 256 }),
};

/** Statuses whose response carries no body. */
const NULL_BODY = new Set([204, 205, 304]);

/** Header lookup by name, any case; repeated headers joined with ", " (as `Headers.get` does). */
function toHeaders(raw: IncomingHttpHeaders): UpstreamResponse['headers'] {
  return {
    get: (name) => {
      const value = raw[name.toLowerCase()];
      if (value === undefined) return null;
      return Array.isArray(value) ? value.join(', ') : value;
    },
  };
}

/**
 * POSTs a JSON body; resolves when the response status and headers arrive, within `timeoutMs`.
 * A failure after that (a dropped connection) surfaces as an error of the response body's stream.
 * The body is sent before the promise is made so that no closure here holds it: `abort` lives as long
 * as the reply, and a closure over `body` would keep a request of up to 6 MB (12 MB as a two-byte
 * string) in memory for the whole generation.
 */
function post(
  url: URL,
  headers: Record<string, string>,
  body: string,
  timeoutMs: number,
): Promise<{ response: UpstreamResponse; abort: () => void }> {
  const secure = url.protocol === 'https:';
  const request = (secure ? httpsRequest : httpRequest)(url, {
    method: 'POST',
    agent: agents[secure ? 'https:' : 'http:'],
    headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
  });
  // Errors are emitted on a later tick, after the listeners below are attached.
  request.end(body);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => request.destroy(new AttemptFailure('timeout', true)), timeoutMs);
    request.on('response', (incoming) => {
      clearTimeout(timer);
      const status = incoming.statusCode ?? 502;
      const stream = NULL_BODY.has(status) ? null : (Readable.toWeb(incoming) as ReadableStream<Uint8Array>);
      if (!stream) incoming.resume();
      resolve({
        response: {
          status,
          ok: status >= 200 && status < 300,
          headers: toHeaders(incoming.headers),
          body: stream,
        },
        abort: () => request.destroy(),
      });
    });
    request.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

async function attemptOnce(
  target: UpstreamTarget,
  apiKey: string | undefined,
  body: Record<string, unknown>,
  timeoutMs: number,
): Promise<OpenedUpstream> {
  const attemptDeadline = Date.now() + timeoutMs;
  let opened: { response: UpstreamResponse; abort: () => void };
  try {
    opened = await post(
      new URL(`${target.baseUrl}/chat/completions`),
      {
        'content-type': 'application/json',
        accept: body.stream ? 'text/event-stream' : 'application/json',
        ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
      },
      JSON.stringify(body),
      timeoutMs,
    );
  } catch (error) {
    throw error instanceof AttemptFailure ? error : new AttemptFailure('connection failed', true);
  }
  const { response } = opened;
  // node:http never follows redirects: a 3xx is simply not a success (OWASP API10).
  if (response.ok) {
    if (!body.stream) return { response, target, abort: opened.abort };
    try {
      return { response: await checkEventStream(response, attemptDeadline), target, abort: opened.abort };
    } catch (error) {
      opened.abort();
      throw error;
    }
  }
  const status = response.status;
  if (status === 400) {
    const message = await readErrorMessage(response);
    if (message) throw new BadRequestError(message, null, 'upstream_rejected_request');
  } else {
    await response.body?.cancel().catch(() => {});
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
 * an event stream still silent then is committed to (a slow first token is not a fault). Returns a
 * response that replays what was read to decide.
 */
async function checkEventStream(response: UpstreamResponse, deadline: number): Promise<UpstreamResponse> {
  const type = response.headers.get('content-type') ?? '';
  if (!/^text\/event-stream\b/i.test(type.trim())) {
    await response.body?.cancel().catch(() => {});
    throw new AttemptFailure(`not an event stream (${type.slice(0, 40) || 'no content type'})`, false);
  }
  if (!response.body) throw new AttemptFailure('empty event stream', false);
  const reader = response.body.getReader();
  const seen: Uint8Array[] = [];
  let verdict: 'ok' | AttemptFailure | undefined;
  const parser = createParser({
    onComment() {
      verdict ??= 'ok';
    },
    onEvent(event) {
      verdict ??= judgeFirstEvent(event.data);
    },
  });
  const decoder = new TextDecoder();
  let size = 0;
  while (verdict === undefined) {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), Math.max(0, deadline - Date.now()));
    });
    const next = await Promise.race([reader.read(), timeout])
      .catch(() => 'lost' as const)
      .finally(() => clearTimeout(timer));
    if (next === 'lost') verdict = new AttemptFailure('connection lost before the first event', true);
    // A live event stream that is still thinking (a reasoning model's first token can take a minute):
    // commit to it, and let the relay's keep-alives hold the client from here.
    else if (next === 'timeout') verdict = 'ok';
    else if (next.done) verdict = new AttemptFailure('event stream ended before its first event', true);
    else {
      seen.push(next.value);
      size += next.value.byteLength;
      parser.feed(decoder.decode(next.value, { stream: true }));
      if (verdict === undefined && size > FIRST_EVENT_MAX_BYTES)
        verdict = new AttemptFailure('first event too large', false);
    }
  }
  if (verdict !== 'ok') {
    await reader.cancel().catch(() => {});
    throw verdict;
  }
  const replay = new ReadableStream<Uint8Array>({
    pull: async (controller) => {
      const buffered = seen.shift();
      if (buffered) return controller.enqueue(buffered);
      const next = await reader.read();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    cancel: (reason) => reader.cancel(reason),
  });
  return { ...response, body: replay };
}

const FIRST_EVENT_MAX_BYTES = 1024 * 1024;

function judgeFirstEvent(data: string): 'ok' | AttemptFailure {
  let first: unknown;
  try {
    first = JSON.parse(data);
  } catch {
    return new AttemptFailure('first event is not JSON', false);
  }
  if (typeof first !== 'object' || first === null)
    return new AttemptFailure('first event is not a chunk', false);
  const chunk = first as { error?: unknown; choices?: unknown; usage?: unknown };
  if (chunk.error !== undefined) return new AttemptFailure('error event', true);
  if (Array.isArray(chunk.choices)) return 'ok';
  return new AttemptFailure('first event is not a chat completion chunk', false);
}

/** Retry-After as seconds or an HTTP date. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
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
 * Reads a body as text up to a byte bound; a larger body is an upstream failure (thrown), never a
 * memory problem. With a deadline (epoch ms), a body still arriving then is a BodyDeadlineError.
 * The rest of the body is not read.
 */
export async function readBodyBounded(
  response: UpstreamResponse,
  maxBytes: number,
  deadline?: number,
): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const next = deadline === undefined ? await reader.read() : await readBefore(reader, deadline);
    if (next === 'deadline') {
      await reader.cancel().catch(() => {});
      throw new BodyDeadlineError();
    }
    if (next.done) break;
    size += next.value.byteLength;
    if (size > maxBytes) {
      await reader.cancel();
      throw new Error(`upstream body larger than ${maxBytes} bytes`);
    }
    parts.push(next.value);
  }
  return Buffer.concat(parts).toString('utf8');
}

async function readBefore<T>(
  reader: ReadableStreamDefaultReader<T>,
  deadline: number,
): Promise<Awaited<ReturnType<ReadableStreamDefaultReader<T>['read']>> | 'deadline'> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<'deadline'>((resolve) => {
    timer = setTimeout(() => resolve('deadline'), Math.max(0, deadline - Date.now()));
  });
  try {
    return await Promise.race([reader.read(), expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** The `error.message` of an OpenAI-shaped error body of at most 16 KiB; undefined otherwise. */
async function readErrorMessage(response: UpstreamResponse): Promise<string | undefined> {
  try {
    const parsed = JSON.parse(await readBodyBounded(response, 16_384)) as { error?: { message?: unknown } };
    const message = parsed.error?.message;
    return typeof message === 'string' ? message.slice(0, 1_000) : undefined;
  } catch {
    return undefined;
  }
}
