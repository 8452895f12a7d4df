/**
 * The models function (buffered Function URL): the model list, and a customer's own credits and
 * generations (routes.ts). Thin: the route and the caller are settled by `before` middlewares.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy, { type MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import { getStore } from '../adapters/dynamodb/index.js';
import { originVerifyValue } from '../adapters/secrets.js';
import { authorize, type Principal } from '../core/access.js';
import {
  type FunctionUrlEvent,
  type FunctionUrlResult,
  header,
  httpErrorHandler,
  jsonResponse,
  originVerify,
  requestIdOf,
  requestMetrics,
} from '../shared/http.js';
import { logger } from '../shared/observability.js';
import { loadCaller } from '../shared/principal.js';
import { answer, routeOf } from './routes.js';

interface Routed {
  path: string;
  principal: Principal;
}
const routed = new WeakMap<Context, Routed>();

/** Route (404/405 need no key), then the caller: 401 or 403 before anything is read for them. */
function routeAndAuthenticate(): MiddlewareObj<FunctionUrlEvent, FunctionUrlResult, Error, Context> {
  return {
    before: async function routeAndAuthenticateBefore(request) {
      const path = routeOf(request.event);
      const principal = authorize(await loadCaller(getStore(), header(request.event, 'authorization')), {
        requireCredit: false,
        topUpUrl: '',
      });
      routed.set(request.context, { path, principal });
    },
  };
}

async function models(event: FunctionUrlEvent, context: Context): Promise<FunctionUrlResult> {
  const caller = routed.get(context);
  if (!caller) throw new Error('routeAndAuthenticate did not run');
  const body = await answer(caller.path, event, caller.principal, getStore());
  return jsonResponse(200, body, { 'x-request-id': requestIdOf(context) });
}

export const handler = middy<FunctionUrlEvent, FunctionUrlResult>()
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .use(requestMetrics())
  .use(httpErrorHandler())
  .use(originVerify(originVerifyValue))
  .use(routeAndAuthenticate())
  .handler(models);
