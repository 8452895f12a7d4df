/**
 * The account function (deployed as "models"; a buffered Function URL behind CloudFront's default
 * behaviour): the model list, and a customer's own credits and generations. The route (404/405, no
 * key needed) and the caller (the shared authenticate middleware) are settled before the handler;
 * every answer comes before the function's timeout (answer-by.ts).
 */
import { getStore } from '../adapters/dynamodb/index.js';
import { answerBy } from '../shared/answer-by.js';
import type { CallerContext } from '../shared/authenticate.js';
import { handlerChain } from '../shared/chain.js';
import { keyDailyCapsOn } from '../shared/env.js';
import { type FunctionUrlEvent, type FunctionUrlResult, jsonResponse, requestIdOf } from '../shared/http.js';
import type { RoutedContext } from '../shared/routing.js';
import { answer } from './routes.js';

type AccountContext = CallerContext & RoutedContext<'models'>;

/** Whether `/key` states a key's daily cap (read once, at cold start). */
const KEY_DAILY_CAPS = keyDailyCapsOn();

async function account(event: FunctionUrlEvent, context: AccountContext): Promise<FunctionUrlResult> {
  const body = await answer(context.routed, {
    event,
    caller: context.caller,
    store: getStore(),
    keyDailyCaps: KEY_DAILY_CAPS,
  });
  return jsonResponse(200, body, { 'x-request-id': requestIdOf(context) });
}

const handled = handlerChain<'models', AccountContext>({
  fn: 'models',
  store: getStore,
  topUpUrl: '',
}).handler(account);

// Lambda hands a plain context; the middlewares above add the route and the caller to it.
export const handler = answerBy((event, context) => handled(event, context as AccountContext));
