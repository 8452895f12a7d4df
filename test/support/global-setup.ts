import type { TestProject } from 'vitest/node';
import { startDynamoLocal } from '../../lib/local/dynamodb-local.js';

/**
 * One in-memory DynamoDB Local for the whole run (real engine, never a mock). Each test file makes
 * its own tables under a random prefix, so files run in parallel without sharing data.
 */
export default async function setup(project: TestProject) {
  if (process.env.SVC_BASE_URL) {
    // The contract suite against a deployed stack needs no local database.
    project.provide('dynamoEndpoint', '');
    return;
  }
  if (process.env.DYNAMODB_ENDPOINT) {
    project.provide('dynamoEndpoint', process.env.DYNAMODB_ENDPOINT);
    return;
  }
  const dynamo = await startDynamoLocal();
  project.provide('dynamoEndpoint', dynamo.endpoint);
  return async () => {
    await dynamo.stop();
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    dynamoEndpoint: string;
  }
}
