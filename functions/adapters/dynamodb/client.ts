/**
 * The DynamoDB client and the module-scope store of a function: kept-alive sockets, bounded waits,
 * built once per cold start from the environment.
 */
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { DynamoDBClient, type DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { tableNamesFromEnv } from './items.js';
import { DynamoStore } from './store.js';
import { type DynamoTimeouts, dynamoTimeouts } from './timeouts.js';

/**
 * Client options: `DYNAMODB_ENDPOINT` points at the local stack's DynamoDB, signed with the role
 * credentials the local emulator puts in the environment as Lambda does (its IAM layer checks each
 * call against that role's policy), or the operator's `local` when none are set.
 */
function dynamoClientConfig(env: NodeJS.ProcessEnv = process.env): DynamoDBClientConfig {
  const endpoint = env.DYNAMODB_ENDPOINT;
  if (!endpoint) return {};
  return {
    endpoint,
    region: env.AWS_REGION ?? 'local',
    credentials: {
      accessKeyId: env.AWS_ACCESS_KEY_ID ?? 'local',
      secretAccessKey: env.AWS_SECRET_ACCESS_KEY ?? 'local',
    },
  };
}

/**
 * Kept-alive sockets for the warm path. An explicit agent measured 1.01 ms of client CPU per call
 * against DynamoDB Local, against 1.36 ms with the SDK's default handler (500 calls each, bench notes).
 */
function keepAliveHandler(timeouts: DynamoTimeouts): NodeHttpHandler {
  return new NodeHttpHandler({
    httpAgent: new HttpAgent({ keepAlive: true, maxSockets: 64 }),
    httpsAgent: new HttpsAgent({ keepAlive: true, maxSockets: 64 }),
    connectionTimeout: timeouts.connectTimeoutMs,
    requestTimeout: timeouts.requestTimeoutMs,
    // Without this, smithy only logs a warning when requestTimeout passes, and the call waits on.
    throwOnRequestTimeout: true,
  });
}

let defaultStore: DynamoStore | undefined;
/** The module-scope store, built once per cold start from the environment. */
export function getStore(): DynamoStore {
  if (defaultStore) return defaultStore;
  const timeouts = dynamoTimeouts();
  defaultStore = new DynamoStore(
    new DynamoDBClient({
      ...dynamoClientConfig(),
      requestHandler: keepAliveHandler(timeouts),
      maxAttempts: timeouts.maxAttempts,
    }),
    tableNamesFromEnv(),
    timeouts,
  );
  return defaultStore;
}
