/**
 * The one authentication step of both functions, a middy `before` middleware as middy's own `http-*`
 * ones are built: the Bearer key parsed without I/O (401), one strongly consistent read of the key and
 * its account (a database that fails or stalls is a 503 with Retry-After), then 401 for an unknown or
 * revoked key, 403 for a suspended or banned account and, where the request spends money, 402. The
 * caller is attached to the invocation's context, typed, for the handler.
 */
import type { MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import { authorize, type Principal } from '../core/access.js';
import type { Store } from '../core/store.js';
import { type FunctionUrlEvent, type FunctionUrlResult, header } from './http.js';
import { loadCaller } from './principal.js';

/** The Lambda context of an authenticated invocation. */
export interface CallerContext extends Context {
  caller: Principal;
}

export function authenticate(options: {
  store: () => Pick<Store, 'loadPrincipal'>;
  /** The request spends money: no available credit is a 402 (with this top-up address). */
  requireCredit: boolean;
  topUpUrl: string;
}): MiddlewareObj<FunctionUrlEvent, FunctionUrlResult, Error, CallerContext> {
  return {
    before: async function authenticateBefore(request) {
      const principal = await loadCaller(options.store(), header(request.event, 'authorization'));
      request.context.caller = authorize(principal, options);
    },
  };
}
