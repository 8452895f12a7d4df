import type { MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import { MethodNotAllowedError, NotFoundError } from '../core/errors.js';
import type { FunctionUrlEvent, FunctionUrlResult } from './http.js';

/** A path without its trailing slashes: one rule for every route of both functions. */
export function normalisedPath(event: FunctionUrlEvent): string {
  return event.rawPath.replace(/\/+$/, '') || '/';
}

/**
 * A function that serves one route: any other path is 404, another method 405, answered before the
 * key is read (a route error needs no key).
 */
export function onlyRoute(
  path: string,
  method: string,
): MiddlewareObj<FunctionUrlEvent, FunctionUrlResult, Error, Context> {
  return {
    before: function onlyRouteBefore({ event }) {
      if (normalisedPath(event) !== path) throw new NotFoundError(`No such endpoint: ${event.rawPath}`);
      const used = event.requestContext.http.method;
      if (used !== method) throw new MethodNotAllowedError(used, [method]);
    },
  };
}
