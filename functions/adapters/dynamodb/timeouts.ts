/** How long the DynamoDB adapter's calls (wire.ts, every call of the store) wait. */
import { positiveIntFromEnv } from '../../shared/env.js';

/**
 * Bounded waits (a stalled database must not hang a request): each attempt gets
 * `DYNAMODB_CONNECT_TIMEOUT_MS` to connect and `DYNAMODB_REQUEST_TIMEOUT_MS` of socket silence, and
 * the calls (wire.ts) make at most `DYNAMODB_MAX_ATTEMPTS` attempts, as the SDK client did. Defaults
 * 1 s, 1 s, 3, while a healthy DynamoDB answers in milliseconds. DynamoDB Local (`DYNAMODB_ENDPOINT`
 * set) gets 5 s to connect and 5 s per request by default: one Java process on a laptop under a
 * 200-request burst can take longer than a second to accept or answer, which is slowness, not a fault.
 *
 * A read a request waits on (a GetItem or BatchGetItem of the direct calls without a caller's deadline
 * of its own: the key and account read before the upstream call, which the account function makes too)
 * gives up, every attempt and backoff included, after `DYNAMODB_READ_BUDGET_MS`: 3 s by default, 5 s on
 * DynamoDB Local. The caller is then told 503 with Retry-After, which is what a stalled database earns,
 * instead of a wait through every attempt of every call. Why 3 s does not refuse a healthy but slow
 * DynamoDB: its p99 for a strongly consistent read is tens of milliseconds, and a cold connection's TCP
 * and TLS handshakes (a Lambda instance's first call, at a small CPU share) take tens to a few hundred
 * milliseconds; 3 s holds two full attempts of 1 s and most of a third, so even a read whose first
 * attempt meets a dropped connection is answered. DynamoDB Local gets one full attempt of its 5 s.
 * Writes keep their own deadlines: a settlement retries until the invocation's, and is deferred rather
 * than refused.
 */
export interface DynamoTimeouts {
  connectTimeoutMs: number;
  requestTimeoutMs: number;
  maxAttempts: number;
  /** The budget of a read without a caller's deadline (wire.ts); none: its attempts alone bound it. */
  readBudgetMs?: number;
}

export function dynamoTimeouts(env: NodeJS.ProcessEnv = process.env): DynamoTimeouts {
  const local = Boolean(env.DYNAMODB_ENDPOINT);
  return {
    connectTimeoutMs: positiveIntFromEnv(env, 'DYNAMODB_CONNECT_TIMEOUT_MS', local ? 5_000 : 1_000),
    requestTimeoutMs: positiveIntFromEnv(env, 'DYNAMODB_REQUEST_TIMEOUT_MS', local ? 5_000 : 1_000),
    maxAttempts: positiveIntFromEnv(env, 'DYNAMODB_MAX_ATTEMPTS', 3),
    readBudgetMs: positiveIntFromEnv(env, 'DYNAMODB_READ_BUDGET_MS', local ? 5_000 : 3_000),
  };
}
