/**
 * DynamoDB's JSON protocol spoken directly, for every call the store makes: the request path's read
 * before its upstream call (BatchGetItem of key and account; GetItem of each while the key's account is
 * not yet known), a held request's hold, its usage record on the hold (UpdateItem) and its release
 * (TransactWriteItems, holds.ts), the settlement after it (TransactWriteItems of ledger entry and
 * deduction), and the operator's and the sweeper's calls (accounts, keys, top-ups, splits, listings:
 * Query and Scan a page at a time, store-db.ts). Signed with `aws4` (SigV4), sent over Node's
 * kept-alive connections (origin.ts), without the SDK client's middleware stack: at small memory sizes
 * Lambda gives a function a small CPU share, and the CPU before the upstream call is added to the time
 * to first token (`npx tsx bench/dynamodb-read.ts` measures the read this way and through the SDK
 * client); and the function bundles carry none of the SDK (docs/performance.md). Region, credentials
 * and endpoint come from the environment in a function, from the SDK client a caller hands the store
 * elsewhere (connection.ts).
 *
 * Same bounds as the SDK client had (timeouts.ts): `connectTimeoutMs` to connect, `requestTimeoutMs` for the
 * answer's head and of silence in its body, at most `maxAttempts` attempts, and a caller's deadline
 * over all of them (an attempt's wait for its head included); a read without a caller's deadline (the
 * key and account read before the upstream call, the account function's) has `readBudgetMs` from its
 * start as its deadline (timeouts.ts says why that bound); like the SDK's standard retry mode it
 * retries network failures, 5xx and throttling with full-jitter backoff, and nothing else; like the
 * SDK it gives a TransactWriteItems without a ClientRequestToken one of its own, the same for every
 * attempt (a repeat of a committed transaction is then answered as its success, not applied again);
 * and like the SDK it corrects its clock from an answer that says the signature's time is off (aws4
 * signs with the time it is given, and knows no offset).
 */
import { randomUUID } from 'node:crypto';
import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import aws4 from 'aws4';
import { CONNECT_TIMEOUT, Origin } from '../origin.js';
import { connectionOfClient, type WireConnection } from './connection.js';
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
  /** The item as it was, for an item sent with ReturnValuesOnConditionCheckFailure ALL_OLD (when it exists). */
  Item?: Record<string, AttributeValue> | undefined;
}

/** A failed call: `name` is DynamoDB's error code (or the network failure's), as the SDK names them. */
export class DynamoWireError extends Error {
  constructor(
    name: string,
    message: string,
    readonly statusCode: number | undefined,
    readonly retryable: boolean,
    options?: ErrorOptions & { cancellationReasons?: CancellationReason[]; socketFailedUnanswered?: boolean },
  ) {
    super(message, options);
    this.name = name;
    this.cancellationReasons = options?.cancellationReasons;
    this.socketFailedUnanswered = options?.socketFailedUnanswered ?? false;
  }

  /** The connection failed before the answer's head arrived. */
  readonly socketFailedUnanswered: boolean;

  /** For a TransactionCanceledException: DynamoDB's reason for each item. */
  readonly cancellationReasons: CancellationReason[] | undefined;
}

export interface CallOptions {
  /** Epoch ms: no attempt or wait goes past it (a request still unanswered then fails as TimeoutError). */
  deadline?: number;
}

interface Endpoint {
  /** The `host` header (with the port when there is one). */
  host: string;
  path: string;
  region: string;
  /** The kept-alive connections to it. */
  origin: Origin;
}

/** The largest answer read (DynamoDB's largest, a 16 MB BatchGetItem): past it, a failed attempt. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;
/** Node's codes for a socket that failed under an exchange. */
const SOCKET_FAILURES = new Set(['ECONNRESET', 'EPIPE']);

export type Operation =
  | 'GetItem'
  | 'BatchGetItem'
  | 'TransactGetItems'
  | 'Query'
  | 'Scan'
  | 'PutItem'
  | 'UpdateItem'
  | 'DeleteItem'
  | 'TransactWriteItems';
/** The operations that only read: bounded by the read budget when the caller sets no deadline. */
const READS: ReadonlySet<Operation> = new Set(['GetItem', 'BatchGetItem']);

export class DynamoWire {
  private endpoint: Promise<Endpoint> | undefined;
  private readonly connection: WireConnection;

  /** `via`: the connection (connection.ts), or an SDK client to take it from. */
  constructor(
    via: WireConnection | DynamoDBClient,
    private readonly timeouts: DynamoTimeouts,
  ) {
    this.connection = 'send' in via ? connectionOfClient(via) : via;
  }

  /** One operation's JSON output; retried within the bounds above, else a DynamoWireError. */
  async call<Output>(operation: Operation, input: object, options: CallOptions = {}): Promise<Output> {
    const body = JSON.stringify(
      operation === 'TransactWriteItems' &&
        (input as { ClientRequestToken?: unknown }).ClientRequestToken === undefined
        ? { ...input, ClientRequestToken: randomUUID() }
        : input,
    );
    const { readBudgetMs } = this.timeouts;
    const deadline =
      options.deadline ??
      (readBudgetMs !== undefined && READS.has(operation)
        ? Date.now() + readBudgetMs
        : Number.POSITIVE_INFINITY);
    for (let attempt = 1; ; attempt++) {
      try {
        const left = deadline - Date.now();
        if (left <= 0) throw new DynamoWireError('TimeoutError', 'deadline passed', undefined, false);
        return parseAnswer<Output>(await this.sendOnce(operation, body, deadline));
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
      const { protocol, hostname, port, path } = await this.connection.endpoint();
      const host = port ? `${hostname.includes(':') ? `[${hostname}]` : hostname}:${port}` : hostname;
      return {
        host,
        path,
        region: await this.connection.region(),
        origin: new Origin(`${protocol}//${host}`, {
          connectTimeoutMs: this.timeouts.connectTimeoutMs,
          maxResponseBytes: MAX_ANSWER_BYTES,
        }),
      };
    })();
    // A failed resolution is not kept: the next call resolves again.
    this.endpoint.catch(() => {
      this.endpoint = undefined;
    });
    return this.endpoint;
  }

  /**
   * One attempt, sent again at once (once) when its socket fails before the answer's head: a kept-alive
   * socket the server closed while it sat idle (an instance thawed after minutes, say) without this
   * process having read the close yet. The request may have reached DynamoDB; the SDK's retries
   * send any call again after such a failure, and the request path's are safe to repeat: reads; a
   * usage record on a hold, a SET of the same value; and a settlement whose ClientRequestToken answers
   * a repeat of a committed transaction as its success without applying it again, and whose ledger
   * entry must not exist yet (test/integration/settlement-resend.test.ts).
   */
  private async sendOnce(operation: Operation, body: string, deadline: number): Promise<string> {
    try {
      return await this.send(operation, body, deadline);
    } catch (error) {
      if (!(error instanceof DynamoWireError && error.socketFailedUnanswered)) throw error;
      return this.send(operation, body, deadline);
    }
  }

  private async send(operation: Operation, body: string, deadline: number): Promise<string> {
    const endpoint = await this.resolveEndpoint();
    // The connection's credentials (an SDK client's provider keeps them until they are about to
    // expire), and its clock offset, which correctClock below corrects from DynamoDB's answers.
    const credentials = await this.connection.credentials();
    const signed = aws4.sign(
      {
        service: 'dynamodb',
        region: endpoint.region,
        method: 'POST',
        host: endpoint.host,
        path: endpoint.path,
        headers: {
          'content-type': 'application/x-amz-json-1.0',
          'x-amz-target': `${API_VERSION}.${operation}`,
          'x-amz-date': amzDate(Date.now() + this.connection.clockOffset),
        },
        body,
      },
      credentials,
    );
    const { requestTimeoutMs } = this.timeouts;
    const left = deadline - Date.now();
    // The head's wait: requestTimeoutMs, or what is left of the deadline (then the wait is not
    // retried: no time is left for it). Then the same timer bounds the body's silence: requestTimeoutMs
    // from the head and from each piece (refreshed, not set again: one timer per attempt).
    const byDeadline = left < requestTimeoutMs;
    const waitMs = Math.max(0, Math.min(requestTimeoutMs, left));
    const { status, date, text } = await new Promise<{
      status: number;
      date: string | undefined;
      text: string;
    }>((resolve, reject) => {
      let head: { status: number; date: string | undefined } | undefined;
      const pieces: Buffer[] = [];
      const onTimer = () => abort(head ? new BodySilence() : new HeadTimeout(byDeadline));
      let timer = setTimeout(onTimer, waitMs);
      const abort = endpoint.origin.exchange(
        {
          path: endpoint.path,
          method: 'POST',
          headers: signed.headers as Record<string, string>,
          body,
        },
        {
          head(status, headers) {
            head = { status, date: headerText(headers.date) };
            if (waitMs === requestTimeoutMs) timer.refresh();
            else {
              clearTimeout(timer);
              timer = setTimeout(onTimer, requestTimeoutMs);
            }
            endpoint.origin.answered(headers['keep-alive']);
          },
          piece(bytes) {
            timer.refresh();
            pieces.push(bytes);
          },
          end() {
            clearTimeout(timer);
            const answered = head ?? { status: 0, date: undefined };
            resolve({ ...answered, text: Buffer.concat(pieces).toString('utf8') });
          },
          fail(error) {
            clearTimeout(timer);
            reject(wireErrorOf(error, head === undefined));
          },
        },
      );
    });
    if (status === 200) return text;
    const error = answerError(status, text);
    throw this.correctClock(error, date) ? retryableCopy(error) : error;
  }

  /**
   * An answer that says the signing time is off, with a Date more than SKEW_TOLERANCE_MS from this
   * clock: the connection's offset is corrected (an SDK client's own, when the wire's settings are
   * that client's, so both sign with it) and the call may be retried.
   */
  private correctClock(error: DynamoWireError, date: string | undefined): boolean {
    if (!CLOCK_SKEW.has(error.name) || !date) return false;
    const serverTime = Date.parse(date);
    if (Number.isNaN(serverTime)) return false;
    const offset = serverTime - Date.now();
    if (Math.abs(offset - this.connection.clockOffset) <= SKEW_TOLERANCE_MS) return false;
    this.connection.clockOffset = offset;
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

/** An attempt's answer had no head in time; `byDeadline`: the time was the caller's deadline's. */
class HeadTimeout extends Error {
  constructor(readonly byDeadline: boolean) {
    super(byDeadline ? 'deadline passed' : 'no answer in time');
  }
}

/** An answer's body fell silent for requestTimeoutMs. */
class BodySilence extends Error {
  constructor() {
    super('no answer in time');
  }
}

/**
 * A failed exchange as the SDK names it: timeouts and network failures are retried, the caller's
 * deadline is not; `beforeHead`: no answer had begun.
 */
function wireErrorOf(error: Error, beforeHead: boolean): DynamoWireError {
  if (error instanceof HeadTimeout)
    return new DynamoWireError('TimeoutError', error.message, undefined, !error.byDeadline, { cause: error });
  if (error instanceof BodySilence)
    return new DynamoWireError('TimeoutError', error.message, undefined, true, { cause: error });
  const code = (error as { code?: unknown }).code;
  switch (code) {
    case CONNECT_TIMEOUT:
      return new DynamoWireError('TimeoutError', 'connection timed out', undefined, true, { cause: error });
    default:
      return new DynamoWireError('NetworkingError', error.message, undefined, true, {
        cause: error,
        socketFailedUnanswered: beforeHead && SOCKET_FAILURES.has(String(code)),
      });
  }
}

/** A header's value as one string (Node gives a repeated one, set-cookie only, as an array). */
function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** SigV4's time format: 2026-11-26T00:30:05.123Z as 20261126T003005Z. */
function amzDate(epochMs: number): string {
  return new Date(epochMs).toISOString().replace(/[:-]|\.\d{3}/g, '');
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
        (reason: { Code?: unknown; Message?: unknown; Item?: unknown }) => ({
          ...(typeof reason?.Code === 'string' ? { Code: reason.Code } : {}),
          ...(typeof reason?.Message === 'string' ? { Message: reason.Message } : {}),
          ...(reason?.Item && typeof reason.Item === 'object'
            ? { Item: reason.Item as NonNullable<CancellationReason['Item']> }
            : {}),
        }),
      );
  } catch {
    // Not JSON (a proxy's page): the status and the start of the text say enough.
  }
  return new DynamoWireError(code, message, status, status >= 500 || THROTTLING.has(code), {
    ...(cancellationReasons ? { cancellationReasons } : {}),
  });
}
