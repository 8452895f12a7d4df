/**
 * The one authentication step of both functions, a middy `before` middleware as middy's own `http-*`
 * ones are built: the Bearer key parsed without I/O (401), one strongly consistent read of the key and
 * its account (a database that fails or stalls is a 503 with Retry-After), then 401 for an unknown or
 * revoked key, 403 for a suspended or banned account and, where the request spends money, 402. The
 * caller is attached to the invocation's context, typed, for the handler.
 *
 * Work that needs no caller (a completion's body parse) can run while the read is on the wire
 * (`whileReading`): at 160 MB a millisecond of CPU is about eleven of latency, and the read's round
 * trip is time the CPU would otherwise spend waiting. Its outcome, a refusal included, is for the
 * handler: the caller's errors (401, 403, 402) still come first.
 */
import type { MiddlewareObj, Request } from '@middy/core';
import type { Context } from 'aws-lambda';
import { authorize, type Principal } from '../core/access.js';
import type { Store } from '../core/store.js';
import { type FunctionUrlEvent, type FunctionUrlResult, header } from './http.js';
import { loadCaller } from './principal.js';

/** The Lambda context of an authenticated invocation. */
export interface CallerContext extends Context {
  caller: Principal;
}

export function authenticate<C extends CallerContext = CallerContext>(options: {
  store: () => Pick<Store, 'loadPrincipal'>;
  /** The request spends money: no available credit is a 402 (with this top-up address). */
  requireCredit: boolean | ((context: C) => boolean);
  topUpUrl: string;
  /** Runs once the read has been sent and before its answer is awaited; it must not throw. */
  whileReading?: (request: Request<FunctionUrlEvent, FunctionUrlResult, Error, C>) => void;
}): MiddlewareObj<FunctionUrlEvent, FunctionUrlResult, Error, C> {
  return {
    before: async function authenticateBefore(request) {
      const reading = loadCaller(options.store(), header(request.event, 'authorization'));
      if (options.whileReading) {
        // Handled now, thrown below: a read that fails during the wait is not an unhandled rejection.
        reading.catch(() => {});
        // The read is on the wire once its signing (microtasks) and its socket write have run: Node's
        // client writes on a kept-alive socket a tick after the request is made (a close or stray bytes
        // already waiting on the socket are read first); two immediates leave room for both.
        await new Promise((resolve) => setImmediate(resolve));
        await new Promise((resolve) => setImmediate(resolve));
        options.whileReading(request);
      }
      const { requireCredit, topUpUrl } = options;
      const spends = typeof requireCredit === 'function' ? requireCredit(request.context) : requireCredit;
      request.context.caller = authorize(await reading, { requireCredit: spends, topUpUrl });
    },
  };
}
