/**
 * DynamoDB's JSON protocol spoken directly, for the calls the request path makes: the read before its
 * upstream call (BatchGetItem of key and account; GetItem of each while the key's account is not yet
 * known), a held request's hold and its release (TransactWriteItems, holds.ts) and the settlement
 * after it (TransactWriteItems of ledger entry and deduction). Same credentials, region, endpoint and
 * clock offset as the function's SDK client, signed as the SDK signs (sigv4.ts), without the client's
 * middleware stack, over a kept-alive HTTP/1.1 exchange of its own (http1.ts):
 * `npx tsx bench/dynamodb-read.ts` measures the read three ways (on Node 22, 20 ms between calls:
 * 2,006 us of CPU through the SDK client, 1,005 signed with the SDK's signer and sent with node:http,
 * 786 with http1.ts, before sigv4.ts). At small memory sizes Lambda gives a function a small CPU
 * share: the CPU before the upstream call is added to the time to first token. Everything else (admin,
 * the sweeper's scan, a failed settlement's record on its hold) stays on the SDK client.
 *
 * Same bounds as the client (client.ts): `connectTimeoutMs` to connect, `requestTimeoutMs` of socket
 * silence, at most `maxAttempts` attempts, and a caller's deadline over all of them; like the SDK's
 * standard retry mode it retries network failures, 5xx and throttling with full-jitter backoff, and
 * nothing else, and like the SDK it corrects its clock from an answer that says the signature's time
 * is off.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type Http1Answer, Http1Client, Http1Error, type Http1Origin } from '../http1.js';
import { DynamoSigner } from './sigv4.js';
import type { DynamoTimeouts } from './timeouts.js';

const API_VERSION = 'DynamoDB_20120810';
/** DynamoDB's throttling error codes (besides any 5xx), retried as the SDK retries them. */
const THROTTLING = new Set([
  'ThrottlingException',
  'ProvisionedThroughputExceededException',
  'RequestLimitExceeded',
  'RequestThrottledException',
  'LimitExceededException',
]);
/** Full-jitter backoff: a random wait of up to 50 ms, then up to 100 ms (as the settlement's retries, store.ts). */
const BACKOFF_BASE_MS = 25;

/** Answers that mean the request's signing time is too far from DynamoDB's clock (as the SDK lists them). */
const CLOCK_SKEW = new Set([
  'InvalidSignatureException',
  'RequestTimeTooSkewed',
  'RequestExpired',
  'SignatureDoesNotMatch',
]);
/** The SDK corrects its clock when it is off by more than this. */
const SKEW_TOLERANCE_MS = 5 * 60_000;

/** Why each item of a cancelled transaction failed, in the order of its items (`None` for those that did not). */
export interface CancellationReason {
  Code?: string | undefined;
  Message?: string | undefined;
}

/** A failed call: `name` is DynamoDB's error code (or the network failure's), as the SDK names them. */
export class DynamoWireError extends Error {
  constructor(
    name: string,
    message: string,
    readonly statusCode: number | undefined,
    readonly retryable: boolean,
    options?: ErrorOptions & { cancellationReasons?: CancellationReason[] },
  ) {
    super(message, options);
    this.name = name;
    this.cancellationReasons = options?.cancellationReasons;
  }

  /** For a TransactionCanceledException: DynamoDB's reason for each item. */
  readonly cancellationReasons: CancellationReason[] | undefined;
}

export interface CallOptions {
  /** Epoch ms: no attempt or wait goes past it (a request still unanswered then fails as TimeoutError). */
  deadline?: number;
}

interface Endpoint extends Http1Origin {
  path: string;
  /** The kept-alive connections to it. */
  http: Http1Client;
  /** Signs for its host and path, in the client's region. */
  signer: DynamoSigner;
}

type Operation = 'GetItem' | 'BatchGetItem' | 'TransactWriteItems';

export class DynamoWire {
  private endpoint: Promise<Endpoint> | undefined;

  constructor(
    private readonly client: DynamoDBClient,
    private readonly timeouts: DynamoTimeouts,
  ) {}

  /** One operation's JSON output; retried within the bounds above, else a DynamoWireError. */
  async call<Output>(operation: Operation, input: object, options: CallOptions = {}): Promise<Output> {
    const body = JSON.stringify(input);
    const deadline = options.deadline ?? Number.POSITIVE_INFINITY;
    for (let attempt = 1; ; attempt++) {
      try {
        const left = deadline - Date.now();
        if (left <= 0) throw new DynamoWireError('TimeoutError', 'deadline passed', undefined, false);
        return parseAnswer<Output>(await this.send(operation, body, left));
      } catch (error) {
        const retryable = error instanceof DynamoWireError && error.retryable;
        if (!retryable || attempt >= this.timeouts.maxAttempts) throw error;
        const wait = Math.random() * BACKOFF_BASE_MS * 2 ** attempt;
        if (Date.now() + wait >= deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  private resolveEndpoint(): Promise<Endpoint> {
    this.endpoint ??= (async () => {
      const origin = await this.origin();
      const { connectTimeoutMs, requestTimeoutMs } = this.timeouts;
      const host = origin.port ? `${origin.hostname}:${origin.port}` : origin.hostname;
      return {
        ...origin,
        http: new Http1Client(origin, { connectTimeoutMs, silenceMs: requestTimeoutMs }),
        signer: new DynamoSigner(await this.client.config.region(), 'dynamodb', { host, path: origin.path }),
      };
    })();
    // A failed resolution is not kept: the next call resolves again.
    this.endpoint.catch(() => {
      this.endpoint = undefined;
    });
    return this.endpoint;
  }

  /** Where the SDK client would send its calls: a configured endpoint, else the region's. */
  private async origin(): Promise<Http1Origin & { path: string }> {
    const config = this.client.config;
    if (config.isCustomEndpoint && config.endpoint) {
      const custom = await config.endpoint();
      return {
        protocol: custom.protocol === 'https:' ? 'https:' : 'http:',
        hostname: custom.hostname,
        port: custom.port,
        path: custom.path || '/',
      };
    }
    const { url } = config.endpointProvider({
      Region: await config.region(),
      UseFIPS: await config.useFipsEndpoint(),
      UseDualStack: await config.useDualstackEndpoint(),
    });
    return {
      protocol: url.protocol === 'http:' ? 'http:' : 'https:',
      hostname: url.hostname,
      port: url.port ? Number(url.port) : undefined,
      path: url.pathname || '/',
    };
  }

  private async send(operation: Operation, body: string, timeLeftMs: number): Promise<string> {
    const endpoint = await this.resolveEndpoint();
    // The SDK client's provider (it keeps the credentials until they are about to expire), and its
    // clock offset: the client corrects it from DynamoDB's answers, and so does correctClock below.
    const credentials = await this.client.config.credentials();
    const headers = endpoint.signer.sign(
      `${API_VERSION}.${operation}`,
      body,
      credentials,
      new Date(Date.now() + (this.client.config.systemClockOffset ?? 0)),
    );
    let head = `POST ${endpoint.path} HTTP/1.1\r\n`;
    for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
    head += `content-length: ${Buffer.byteLength(body)}\r\n\r\n`;
    let answer: Http1Answer;
    try {
      answer = await endpoint.http.post(head, body, timeLeftMs);
    } catch (error) {
      throw wireErrorOf(error as Error);
    }
    if (answer.status === 200) return answer.body;
    const error = answerError(answer.status, answer.body);
    throw this.correctClock(error, answer.date) ? retryableCopy(error) : error;
  }

  /**
   * An answer that says the signing time is off, with a Date more than SKEW_TOLERANCE_MS from this
   * clock: the client's offset is corrected (the SDK client's own, so both sign with it) and the call
   * may be retried.
   */
  private correctClock(error: DynamoWireError, date: string | undefined): boolean {
    if (!CLOCK_SKEW.has(error.name) || !date) return false;
    const serverTime = Date.parse(date);
    if (Number.isNaN(serverTime)) return false;
    const offset = serverTime - Date.now();
    const current = this.client.config.systemClockOffset ?? 0;
    if (Math.abs(offset - current) <= SKEW_TOLERANCE_MS) return false;
    this.client.config.systemClockOffset = offset;
    return true;
  }
}

function retryableCopy(error: DynamoWireError): DynamoWireError {
  return new DynamoWireError(error.name, error.message, error.statusCode, true, { cause: error });
}

/** A 200's body: DynamoDB's JSON, or a named, non-retried failure (a proxy's page is not an answer). */
function parseAnswer<Output>(text: string): Output {
  try {
    return JSON.parse(text) as Output;
  } catch (error) {
    throw new DynamoWireError('InvalidResponse', `not JSON: ${text.slice(0, 100)}`, 200, false, {
      cause: error,
    });
  }
}

/** A failed exchange as the SDK names it: timeouts and network failures are retried, the caller's deadline is not. */
function wireErrorOf(error: Error): DynamoWireError {
  if (!(error instanceof Http1Error))
    return new DynamoWireError('NetworkingError', error.message, undefined, true, { cause: error });
  switch (error.kind) {
    case 'connect-timeout':
      return new DynamoWireError('TimeoutError', 'connection timed out', undefined, true, { cause: error });
    case 'silence':
      return new DynamoWireError('TimeoutError', 'no answer in time', undefined, true, { cause: error });
    case 'time-limit':
      return new DynamoWireError('TimeoutError', 'deadline passed', undefined, false, { cause: error });
    default:
      return new DynamoWireError('NetworkingError', error.message, undefined, true, { cause: error });
  }
}

/** DynamoDB's error answer: `{"__type": "com.amazonaws.dynamodb.v20120810#Code", "message": "..."}`. */
function answerError(status: number, text: string): DynamoWireError {
  let code = `HTTP${status}`;
  let message = text.slice(0, 300);
  let cancellationReasons: CancellationReason[] | undefined;
  try {
    const parsed = JSON.parse(text) as {
      __type?: unknown;
      message?: unknown;
      Message?: unknown;
      CancellationReasons?: unknown;
    };
    if (typeof parsed.__type === 'string') code = parsed.__type.split('#').pop() || code;
    const said = parsed.message ?? parsed.Message;
    if (typeof said === 'string') message = said;
    if (Array.isArray(parsed.CancellationReasons))
      cancellationReasons = parsed.CancellationReasons.map(
        (reason: { Code?: unknown; Message?: unknown }) => ({
          ...(typeof reason?.Code === 'string' ? { Code: reason.Code } : {}),
          ...(typeof reason?.Message === 'string' ? { Message: reason.Message } : {}),
        }),
      );
  } catch {
    // Not JSON (a proxy's page): the status and the start of the text say enough.
  }
  return new DynamoWireError(code, message, status, status >= 500 || THROTTLING.has(code), {
    ...(cancellationReasons ? { cancellationReasons } : {}),
  });
}
