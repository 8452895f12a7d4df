/**
 * Secrets Manager's GetSecretValue spoken directly, as wire.ts speaks DynamoDB: its JSON 1.1 protocol
 * (`X-Amz-Target: secretsmanager.GetSecretValue`) to `secretsmanager.<region>.amazonaws.com`, signed
 * with `aws4` (SigV4) with the environment's credentials (where Lambda puts the function role's),
 * over Node's kept-alive connections (origin.ts): the function bundles carry none of the SDK's client
 * (docs/performance.md). The SDK client's bounds as secrets.ts had them: 1 s to connect, 2 s for the
 * answer's head and of silence in its body, 3 attempts, network failures, 5xx and throttling retried
 * with full-jitter backoff, nothing else. A failed call is an Error named by Secrets Manager's code
 * (ResourceNotFoundException, AccessDeniedException...), as the SDK names it.
 */
import aws4 from 'aws4';
import type { WireCredentials } from './dynamodb/connection.js';
import { Origin } from './origin.js';

const CONNECT_TIMEOUT_MS = 1_000;
const REQUEST_TIMEOUT_MS = 2_000;
const MAX_ATTEMPTS = 3;
const BACKOFF_BASE_MS = 50;
/** A secret value is at most 64 KiB; its answer's JSON, a little more. */
const MAX_ANSWER_BYTES = 1024 * 1024;
const THROTTLING = new Set(['ThrottlingException', 'TooManyRequestsException', 'RequestLimitExceeded']);

/** The kept-alive connections, by origin. */
const origins = new Map<string, Origin>();

/** A failed GetSecretValue: `name` is Secrets Manager's code, or the network failure's. */
class SecretsManagerError extends Error {
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

/** The secret's string value at `versionStage` (undefined for a binary secret). */
export async function getSecretValue(
  where: Where,
  secretId: string,
  versionStage: string,
): Promise<string | undefined> {
  const body = JSON.stringify({ SecretId: secretId, VersionStage: versionStage });
  for (let attempt = 1; ; attempt++) {
    try {
      const text = await exchange(where, body);
      return (JSON.parse(text) as { SecretString?: string }).SecretString;
    } catch (error) {
      if (!(error instanceof SecretsManagerError && error.retryable) || attempt >= MAX_ATTEMPTS) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * BACKOFF_BASE_MS * 2 ** attempt));
    }
  }
}

/** `url`: `https://secretsmanager.<region>.amazonaws.com` (a test's own server elsewhere). */
export interface Where {
  url: string;
  region: string;
  credentials: WireCredentials;
}

async function exchange({ url, region, credentials }: Where, body: string): Promise<string> {
  let origin = origins.get(url);
  if (!origin) {
    origin = new Origin(url, { connectTimeoutMs: CONNECT_TIMEOUT_MS, maxResponseBytes: MAX_ANSWER_BYTES });
    origins.set(url, origin);
  }
  const { host } = new URL(url);
  const signed = aws4.sign(
    {
      service: 'secretsmanager',
      region,
      method: 'POST',
      host,
      path: '/',
      headers: {
        'content-type': 'application/x-amz-json-1.1',
        'x-amz-target': 'secretsmanager.GetSecretValue',
      },
      body,
    },
    credentials,
  );
  const answerOf = origin;
  const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    let status = 0;
    const pieces: Buffer[] = [];
    const timer = setTimeout(
      () => abort(new SecretsManagerError('TimeoutError', 'no answer in time', true)),
      REQUEST_TIMEOUT_MS,
    );
    const abort = answerOf.exchange(
      { path: '/', method: 'POST', headers: signed.headers as Record<string, string>, body },
      {
        head(code, headers) {
          status = code;
          timer.refresh();
          answerOf.answered(headers['keep-alive']);
        },
        piece(bytes) {
          timer.refresh();
          pieces.push(bytes);
        },
        end() {
          clearTimeout(timer);
          resolve({ status, text: Buffer.concat(pieces).toString('utf8') });
        },
        fail(error) {
          clearTimeout(timer);
          reject(
            error instanceof SecretsManagerError
              ? error
              : new SecretsManagerError('NetworkingError', error.message, true, { cause: error }),
          );
        },
      },
    );
  });
  if (status === 200) return text;
  throw answerError(status, text);
}

/** Secrets Manager's error answer: `{"__type": "ResourceNotFoundException", "Message": "..."}`. */
function answerError(status: number, text: string): SecretsManagerError {
  let code = `HTTP${status}`;
  let message = text.slice(0, 300);
  try {
    const parsed = JSON.parse(text) as { __type?: unknown; message?: unknown; Message?: unknown };
    if (typeof parsed.__type === 'string') code = parsed.__type.split('#').pop() || code;
    const said = parsed.Message ?? parsed.message;
    if (typeof said === 'string') message = said;
  } catch {
    // Not JSON (a proxy's page): the status and the start of the text say enough.
  }
  return new SecretsManagerError(code, message, status >= 500 || THROTTLING.has(code));
}
