import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import { getStore } from '../adapters/dynamodb/index.js';
import { originVerifyValues, upstreamCredential } from '../adapters/secrets.js';
import { type AfterReplyContext, afterReplyPlugin } from '../shared/after-reply.js';
import { authenticate, type CallerContext } from '../shared/authenticate.js';
import { compressResponse } from '../shared/compression.js';
import { cors } from '../shared/cors.js';
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
import { onlyRoute } from '../shared/routing.js';
import { complete } from './complete.js';
import { loadCompletionsConfig } from './config.js';

/** The completions function: a Function URL in RESPONSE_STREAM mode, behind CloudFront's `/api/v1/chat/completions`. */
export const PATH = '/api/v1/chat/completions';

// Read and checked once per cold start: a bad configuration fails here, naming the field.
const config = loadCompletionsConfig();

const ports = { store: getStore(), config, credential: upstreamCredential };

type InvocationContext = CallerContext & AfterReplyContext;

/** POST /api/v1/chat/completions, the caller already authenticated (the `authenticate` middleware). */
async function completions(event: FunctionUrlEvent, context: InvocationContext): Promise<FunctionUrlResult> {
  const { caller, afterReply } = context;
  const remainingMs = context.getRemainingTimeInMillis();
  return complete(event, { caller, requestId: requestIdOf(context), remainingMs, afterReply }, ports);
}

export const handler = middy<FunctionUrlEvent, FunctionUrlResult, Error, InvocationContext>({
  streamifyResponse: true,
  // The settlement runs after the reply is out, and is awaited before the invocation ends.
  ...afterReplyPlugin(),
})
  // First, so that its `after` sees the reply as sent (a stream, compressed or not).
  .use(reclaimLargeInvocations({ memoryMb: lambdaMemoryMb() }))
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .use(requestMetrics())
  // Its `after` sees the handler's answer (errors go out as they are): gzip if the client asks.
  .use(compressResponse())
  // Before the error handler: its onError runs after the handler's, so errors carry the headers too.
  .use(cors())
  .use(httpErrorHandler())
  .use(originVerify(originVerifyValues))
  .use(onlyRoute(PATH, 'POST'))
  .use(authenticate({ store: () => ports.store, requireCredit: true, topUpUrl: config.topUpUrl }))
  .handler(completions);
