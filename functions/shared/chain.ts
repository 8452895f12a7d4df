/**
 * The middleware chain of both functions, built in one place because its order matters: middy runs
 * the `before`s top to bottom, then the `after`s (or the `onError`s) bottom to top. What differs
 * between the functions is passed in: which function it is (its routes in the route table, routes.ts,
 * and the authentication each names), the store and top-up address, the middlewares that wrap the
 * reply, and work to run while the caller's read is on the wire.
 */
import middy, { type MiddlewareObj, type Request } from '@middy/core';
import type { Context } from 'aws-lambda';
import { originVerifyValues } from '../adapters/secrets.js';
import type { Store } from '../core/store.js';
import { authenticate, type CallerContext } from './authenticate.js';
import { cors } from './cors.js';
import { type FunctionUrlEvent, type FunctionUrlResult, httpErrorHandler, originVerify } from './http.js';
import { logContext } from './observability.js';
import type { ApiFunction } from './routes.js';
import { type RoutedContext, route } from './routing.js';

type Middleware = MiddlewareObj<FunctionUrlEvent, FunctionUrlResult, Error, Context>;

export function handlerChain<
  F extends ApiFunction,
  C extends CallerContext & RoutedContext<F> = CallerContext & RoutedContext<F>,
>(options: {
  fn: F;
  store: () => Pick<Store, 'loadPrincipal'>;
  /** Where a 402 sends the caller to add credit. */
  topUpUrl: string;
  /** First, so that their `after` sees the reply as sent (a stream, compressed or not). */
  outermost?: readonly Middleware[];
  /** After the log context and before CORS: their `after` sees the handler's answer (errors go out as they are). */
  onAnswer?: readonly Middleware[];
  /** Runs while the caller's read is on the wire (authenticate.ts). */
  whileReading?: (request: Request<FunctionUrlEvent, FunctionUrlResult, Error, C>) => void;
}) {
  return (
    middy<FunctionUrlEvent, FunctionUrlResult, Error, C>()
      .use([...(options.outermost ?? [])])
      .use(logContext())
      .use([...(options.onAnswer ?? [])])
      // Before the error handler: its onError runs after the handler's, so errors carry the headers too.
      .use(cors())
      .use(httpErrorHandler())
      .use(originVerify(originVerifyValues))
      // The route before the key: a 404 or 405 needs no key.
      .use(route(options.fn))
      .use(
        authenticate<C>({
          store: options.store,
          requireCredit: (context) => context.routed.route.auth === 'key+credit',
          topUpUrl: options.topUpUrl,
          ...(options.whileReading ? { whileReading: options.whileReading } : {}),
        }),
      )
  );
}
