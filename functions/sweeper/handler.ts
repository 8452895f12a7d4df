/** The hold sweeper: run by an EventBridge schedule (lib/infra), and by `npm start` on the same schedule. */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import { getStore } from '../adapters/dynamodb/index.js';
import { logger } from '../shared/observability.js';
import { type SweepResult, sweepExpiredHolds } from './sweep.js';

export const handler = middy<unknown, SweepResult>()
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .handler(async () => sweepExpiredHolds(getStore()));
