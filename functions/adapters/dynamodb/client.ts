/**
 * The module-scope store of a function, built once per cold start from the environment, without an
 * SDK client: every call of the store goes through the wire (wire.ts), which takes its region,
 * credentials and endpoint from the environment (connection.ts), so the function bundles carry none
 * of the AWS SDK's runtime (about 214 KiB of each, docs/performance.md). Kept-alive sockets and
 * bounded waits are the wire's (origin.ts, timeouts.ts).
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { connectionFromEnv } from './connection.js';
import { tableNamesFromEnv } from './items.js';
import { DynamoRequestStore } from './request-store.js';
import { DynamoStore } from './store.js';
import { dynamoTimeouts } from './timeouts.js';

/**
 * What a function's store has for an SDK client: none. A store part that still calls `client.send`
 * fails here, by name, instead of pulling the SDK into every function bundle; its calls belong on the
 * wire (`this.wire.call`, with the operation's name and the same input).
 */
export const NO_SDK_CLIENT = {
  send: () =>
    Promise.reject(
      new Error(
        "a function's DynamoDB store has no SDK client (dynamodb/client.ts): make the call through the wire, this.wire.call(operation, input)",
      ),
    ),
} as unknown as DynamoDBClient;

let defaultStore: DynamoStore | undefined;
/** The module-scope store, built once per cold start from the environment. */
export function getStore(): DynamoStore {
  defaultStore ??= new DynamoStore(NO_SDK_CLIENT, tableNamesFromEnv(), dynamoTimeouts(), connectionFromEnv());
  return defaultStore;
}

let requestStore: DynamoRequestStore | undefined;
/**
 * The request path's module-scope store (request-store.ts), built once per cold start like getStore's:
 * the completions function's, whose bundle then carries only the parts of the store it uses.
 */
export function getRequestStore(): DynamoRequestStore {
  requestStore ??= new DynamoRequestStore(
    NO_SDK_CLIENT,
    tableNamesFromEnv(),
    dynamoTimeouts(),
    connectionFromEnv(),
  );
  return requestStore;
}
