import type { MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import { MethodNotAllowedError, NotFoundError } from '../core/errors.js';
import { cutToCodePoints } from '../core/strings.js';
import type { FunctionUrlEvent, FunctionUrlResult } from './http.js';

/** A path without its trailing slashes: one rule for every route of both functions. */
export function normalisedPath(event: FunctionUrlEvent): string {
  return event.rawPath.replace(/\/+$/, '') || '/';
}

/**
 * The 404 of a path no route serves. OpenAI's own paths start at `/v1`; this API's at `/api/v1`, so a
 * client configured with OpenAI's habits is told where to go.
 */
export function noSuchEndpoint(rawPath: string): NotFoundError {
  const path = rawPath.length > 200 ? `${cutToCodePoints(rawPath, 200)}...` : rawPath;
  if (!/^\/v1(\/|$)/.test(rawPath)) return new NotFoundError(`No such endpoint: ${path}`);
  return new NotFoundError(
    `No such endpoint: ${path}. This API is served under /api/v1: use /api${path} (an OpenAI SDK's baseURL ends in /api/v1).`,
  );
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
      if (normalisedPath(event) !== path) throw noSuchEndpoint(event.rawPath);
      const used = event.requestContext.http.method;
      if (used !== method) throw new MethodNotAllowedError(used, [method]);
    },
  };
}
