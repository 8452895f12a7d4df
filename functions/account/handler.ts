/**
 * The account function (deployed as "models"; a buffered Function URL behind CloudFront's default
 * behaviour): the model list, and a customer's own credits and generations. The route (404/405, no
 * key needed) and the caller (the shared authenticate middleware) are settled before the handler;
 * every answer comes before the function's timeout (answer-by.ts).
 */
import middy, { type MiddlewareObj } from '@middy/core';
import { getStore } from '../adapters/dynamodb/index.js';
import { originVerifyValues } from '../adapters/secrets.js';
import { answerBy } from '../shared/answer-by.js';
import { authenticate, type CallerContext } from '../shared/authenticate.js';
import { cors } from '../shared/cors.js';
import {
  type FunctionUrlEvent,
  type FunctionUrlResult,
  httpErrorHandler,
  jsonResponse,
  originVerify,
  requestIdOf,
} from '../shared/http.js';
import { logContext } from '../shared/observability.js';
import { answer, type Routed, routeOf } from './routes.js';

interface AccountContext extends CallerContext {
  routed: Routed;
}

function route(): MiddlewareObj<FunctionUrlEvent, FunctionUrlResult, Error, AccountContext> {
  return {
    before: function routeBefore(request) {
      request.context.routed = routeOf(request.event);
    },
  };
}

async function account(event: FunctionUrlEvent, context: AccountContext): Promise<FunctionUrlResult> {
  const body = await answer(context.routed, { event, caller: context.caller, store: getStore() });
  return jsonResponse(200, body, { 'x-request-id': requestIdOf(context) });
}

const handled = middy<FunctionUrlEvent, FunctionUrlResult, Error, AccountContext>()
  .use(logContext())
  // Before the error handler: its onError runs after the handler's, so errors carry the headers too.
  .use(cors())
  .use(httpErrorHandler())
  .use(originVerify(originVerifyValues))
  .use(route())
  .use(authenticate({ store: getStore, requireCredit: false, topUpUrl: '' }))
  .handler(account);

// Lambda hands a plain context; the middlewares above add the route and the caller to it.
export const handler = answerBy((event, context) => handled(event, context as AccountContext));
