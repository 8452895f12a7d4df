/**
 * The completions function: a Function URL in RESPONSE_STREAM mode, behind CloudFront's behaviours for
 * its route (POST /api/v1/chat/completions in the route table, shared/routes.ts).
 */
import { getRequestStore } from '../adapters/dynamodb/index.js';
import { prefetchRequestSecrets, upstreamCredential } from '../adapters/secrets.js';
import { type AfterReplyContext, streamingHandler } from '../shared/after-reply.js';
import type { CallerContext } from '../shared/authenticate.js';
import { handlerChain } from '../shared/chain.js';
import { acceptsGzip, compressResponse } from '../shared/compression.js';
import { type FunctionUrlEvent, type FunctionUrlResult, requestIdOf } from '../shared/http.js';
import { lambdaMemoryMb, reclaimLargeInvocations } from '../shared/memory.js';
import type { RoutedContext } from '../shared/routing.js';
import { complete, type TakenRequest, takeChatRequest, takeSmallChatRequest } from './complete.js';
import { loadCompletionsConfig } from './config.js';

// Read and checked once per cold start: a bad configuration fails here, naming the field.
const config = loadCompletionsConfig();

const ports = { store: getRequestStore(), config, credential: upstreamCredential };

// The secrets a first request waits for (origin check, upstream credentials, usage signing), asked for
// now, during init: their reads overlap init and the first request instead of adding to its wait.
prefetchRequestSecrets(Object.values(config.tiers).flatMap((tier) => tier.targets.map((t) => t.credential)));

type InvocationContext = CallerContext &
  RoutedContext<'completions'> &
  AfterReplyContext & { taken?: TakenRequest | undefined };

/** POST /api/v1/chat/completions, the caller already authenticated (the `authenticate` middleware). */
async function completions(event: FunctionUrlEvent, context: InvocationContext): Promise<FunctionUrlResult> {
  const { caller, afterReply } = context;
  const taken = context.taken ?? takeChatRequest(event);
  // The context lives as long as the invocation: it must not keep the request past the reply.
  context.taken = undefined;
  const remainingMs = context.getRemainingTimeInMillis();
  // A stream is compressed by its relay as it writes (relay.ts); a JSON reply by compressResponse.
  const gzip = acceptsGzip(event.headers?.['accept-encoding']);
  return complete(taken, { caller, requestId: requestIdOf(context), remainingMs, afterReply, gzip }, ports);
}

const handled = handlerChain<'completions', InvocationContext>({
  fn: 'completions',
  store: () => ports.store,
  topUpUrl: config.topUpUrl,
  outermost: [reclaimLargeInvocations({ memoryMb: lambdaMemoryMb() })],
  // gzip if the client asks.
  onAnswer: [compressResponse()],
  // A small body is parsed and validated while the caller's read is on the wire (a large one after
  // it); a 400 follows the caller's own errors.
  whileReading: (request) => {
    request.context.taken = takeSmallChatRequest(request.event);
  },
}).handler(completions);

// A response-streaming function: the reply goes out as it is made, and the settlement follows it,
// awaited before the invocation ends (after-reply.ts).
export const handler = streamingHandler(handled);
