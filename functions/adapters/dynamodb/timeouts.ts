/** How long the DynamoDB adapter waits, for the SDK client (client.ts) and the direct calls (wire.ts) alike. */
import { positiveIntFromEnv } from '../../shared/env.js';

/**
 * Bounded waits (a stalled database must not hang a request): each attempt gets
 * `DYNAMODB_CONNECT_TIMEOUT_MS` to connect and `DYNAMODB_REQUEST_TIMEOUT_MS` of socket silence, and
 * the SDK client and the direct calls (wire.ts) make at most `DYNAMODB_MAX_ATTEMPTS` attempts. Defaults
 * 1 s, 1 s, 3: a dead database is known in about 3.3 s, while a healthy DynamoDB answers in
 * milliseconds. DynamoDB Local (`DYNAMODB_ENDPOINT` set) gets 5 s to connect and 5 s per request by
 * default: one Java process on a laptop under a 200-request burst can take longer than a second to
 * accept or answer, which is slowness, not a fault.
 */
export interface DynamoTimeouts {
  connectTimeoutMs: number;
  requestTimeoutMs: number;
  maxAttempts: number;
}

export function dynamoTimeouts(env: NodeJS.ProcessEnv = process.env): DynamoTimeouts {
  return {
    connectTimeoutMs: positiveIntFromEnv(
      env,
      'DYNAMODB_CONNECT_TIMEOUT_MS',
      env.DYNAMODB_ENDPOINT ? 5_000 : 1_000,
    ),
    requestTimeoutMs: positiveIntFromEnv(
      env,
      'DYNAMODB_REQUEST_TIMEOUT_MS',
      env.DYNAMODB_ENDPOINT ? 5_000 : 1_000,
    ),
    maxAttempts: positiveIntFromEnv(env, 'DYNAMODB_MAX_ATTEMPTS', 3),
  };
}
