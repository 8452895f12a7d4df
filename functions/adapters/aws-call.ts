/**
 * One call to an AWS JSON API spoken directly, as wire.ts speaks DynamoDB: a POST signed with `aws4`
 * (SigV4) with the environment's credentials (where Lambda puts the function role's), over Node's
 * kept-alive connections (origin.ts), so the function bundles carry none of the SDK's clients
 * (docs/performance.md). Bounded as the SDK's clients are: a connect timeout, a timeout on the
 * answer's head and on silence in its body, a cap on the answer's size, a few attempts with
 * full-jitter backoff for network failures, 5xx, 429 and throttling codes, nothing else. A failed call
 * is an Error named by the service's code (ResourceNotFoundException, MessageRejected...), as the SDK
 * names it. Secrets Manager's GetSecretValue (secrets-manager.ts) and SES's SendEmail (ses.ts) use it.
 */
import aws4 from 'aws4';
import type { WireCredentials } from './dynamodb/connection.js';
import { Origin } from './origin.js';

const CONNECT_TIMEOUT_MS = 1_000;
const THROTTLING = new Set(['ThrottlingException', 'TooManyRequestsException', 'RequestLimitExceeded']);

/** The kept-alive connections, by origin and answer cap. */
const origins = new Map<string, Origin>();

/** A failed call: `name` is the service's code, or the network failure's. */
export class AwsCallError extends Error {
  constructor(
    name: string,
    message: string,
    readonly retryable: boolean,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = name;
  }
}

/** Where: `url` is the service's regional endpoint (a stand-in or a test's server elsewhere). */
export interface AwsEndpoint {
  url: string;
  region: string;
  credentials: WireCredentials | (() => Promise<WireCredentials> | WireCredentials);
}

export interface AwsCall {
  /** SigV4's service name: `secretsmanager`, `ses`. */
  service: string;
  path: string;
  headers: Record<string, string>;
  body: string;
  /** For the answer's head, and for each silence in its body. */
  timeoutMs: number;
  maxAnswerBytes: number;
  attempts: number;
  backoffBaseMs: number;
}

/** The answer's text of a 200; throws AwsCallError after the attempts a retryable failure gets. */
export async function callAws(where: AwsEndpoint, call: AwsCall): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await exchange(where, call);
    } catch (error) {
      if (!(error instanceof AwsCallError && error.retryable) || attempt >= call.attempts) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * call.backoffBaseMs * 2 ** attempt));
    }
  }
}

async function exchange(where: AwsEndpoint, call: AwsCall): Promise<string> {
  const originKey = `${where.url} ${call.maxAnswerBytes}`;
  let origin = origins.get(originKey);
  if (!origin) {
    origin = new Origin(where.url, {
      connectTimeoutMs: CONNECT_TIMEOUT_MS,
      maxResponseBytes: call.maxAnswerBytes,
    });
    origins.set(originKey, origin);
  }
  const credentials = typeof where.credentials === 'function' ? await where.credentials() : where.credentials;
  const signed = aws4.sign(
    {
      service: call.service,
      region: where.region,
      method: 'POST',
      host: new URL(where.url).host,
      path: call.path,
      headers: call.headers,
      body: call.body,
    },
    credentials,
  );
  const answerOf = origin;
  const { status, text, errorType } = await new Promise<{
    status: number;
    text: string;
    errorType: string | undefined;
  }>((resolve, reject) => {
    let status = 0;
    let errorType: string | undefined;
    const pieces: Buffer[] = [];
    const timer = setTimeout(
      () => abort(new AwsCallError('TimeoutError', 'no answer in time', true)),
      call.timeoutMs,
    );
    const abort = answerOf.exchange(
      { path: call.path, method: 'POST', headers: signed.headers as Record<string, string>, body: call.body },
      {
        head(code, headers) {
          status = code;
          const type = headers['x-amzn-errortype'];
          errorType = typeof type === 'string' ? type : undefined;
          timer.refresh();
          answerOf.answered(headers['keep-alive']);
        },
        piece(bytes) {
          timer.refresh();
          pieces.push(bytes);
        },
        end() {
          clearTimeout(timer);
          resolve({ status, text: Buffer.concat(pieces).toString('utf8'), errorType });
        },
        fail(error) {
          clearTimeout(timer);
          reject(
            error instanceof AwsCallError
              ? error
              : new AwsCallError('NetworkingError', error.message, true, { cause: error }),
          );
        },
      },
    );
  });
  if (status === 200) return text;
  throw answerError(status, text, errorType);
}

/**
 * An AWS JSON error answer. Its code is in the `X-Amzn-Errortype` header (`Code:uri`, the REST-JSON
 * protocols': SES v2) or the body's `__type` (`namespace#Code`, JSON 1.1's: Secrets Manager); its text
 * in the body's `message` or `Message`.
 */
function answerError(status: number, text: string, errorType: string | undefined): AwsCallError {
  let code = errorType?.split(':')[0] || `HTTP${status}`;
  let message = text.slice(0, 300);
  try {
    const parsed = JSON.parse(text) as { __type?: unknown; message?: unknown; Message?: unknown };
    if (!errorType && typeof parsed.__type === 'string') code = parsed.__type.split('#').pop() || code;
    const said = parsed.Message ?? parsed.message;
    if (typeof said === 'string') message = said;
  } catch {
    // Not JSON (a proxy's page): the status and the start of the text say enough.
  }
  return new AwsCallError(code, message, status >= 500 || status === 429 || THROTTLING.has(code));
}
