import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { getStore } from '../adapters/dynamodb/index.js';
import { originVerifyValue, upstreamCredential } from '../adapters/secrets.js';
import { MethodNotAllowedError, NotFoundError } from '../core/errors.js';
import { compressResponse } from '../shared/compression.js';
import {
  type FunctionUrlEvent,
  type FunctionUrlResult,
  httpErrorHandler,
  originVerify,
  requestIdOf,
  requestMetrics,
} from '../shared/http.js';
import { lambdaMemoryMb, reclaimLargeInvocations } from '../shared/memory.js';
import { logger } from '../shared/observability.js';
import { loadCompletionsConfig } from './config.js';
import { handleCompletion } from './service.js';

/** The completions function: a Function URL in RESPONSE_STREAM mode, behind CloudFront's `/api/v1/chat/completions`. */
export const PATH = '/api/v1/chat/completions';

// Read and checked once per cold start: a bad configuration fails here, naming the field.
const config = loadCompletionsConfig();

async function completions(event: FunctionUrlEvent, context: Context): Promise<FunctionUrlResult> {
  if (event.rawPath !== PATH) throw new NotFoundError(`No such endpoint: ${event.rawPath}`);
  const method = event.requestContext.http.method;
  if (method !== 'POST') throw new MethodNotAllowedError(method, ['POST']);
  return handleCompletion(event, requestIdOf(context), context.getRemainingTimeInMillis(), {
    store: getStore(),
    config,
    credential: upstreamCredential,
  });
}

export const handler = middy<FunctionUrlEvent, FunctionUrlResult>({ streamifyResponse: true })
  // First, so that its `after` sees the reply as sent (a stream, compressed or not).
  .use(reclaimLargeInvocations({ memoryMb: lambdaMemoryMb() }))
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .use(requestMetrics())
  // Its `after` sees the handler's answer (errors go out as they are): gzip if the client asks.
  .use(compressResponse())
  .use(httpErrorHandler())
  .use(originVerify(originVerifyValue))
  .handler(completions);
