import type { MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import { MethodNotAllowedError, NotFoundError } from '../core/errors.js';
import { cutToCodePoints } from '../core/strings.js';
import type { FunctionUrlEvent, FunctionUrlResult } from './http.js';
import { type ApiFunction, ROUTES, type Route, type RouteName, type RouteNameOf } from './routes.js';

/** A path without its trailing slashes: one rule for every route of both functions. */
function normalisedPath(event: FunctionUrlEvent): string {
  return event.rawPath.replace(/\/+$/, '') || '/';
}

/**
 * The 404 of a path no route serves. OpenAI's own paths start at `/v1`; this API's at `/api/v1`, so a
 * client configured with OpenAI's habits is told where to go.
 */
function noSuchEndpoint(rawPath: string): NotFoundError {
  const path = rawPath.length > 200 ? `${cutToCodePoints(rawPath, 200)}...` : rawPath;
  if (!/^\/v1(\/|$)/.test(rawPath)) return new NotFoundError(`No such endpoint: ${path}`);
  return new NotFoundError(
    `No such endpoint: ${path}. This API is served under /api/v1: use /api${path} (an OpenAI SDK's baseURL ends in /api/v1).`,
  );
}

/** A request's route in the table (routes.ts), and what the path names after a prefix route's prefix. */
export interface Routed<N extends RouteName = RouteName> {
  name: N;
  route: Route;
  rest: string;
}

const ENTRIES = Object.entries(ROUTES) as [RouteName, Route][];

/**
 * The route of a request among those function `fn` serves, before authentication (a route error needs
 * no key): a path it does not serve is 404, a served path with another method 405.
 */
export function routeOf<F extends ApiFunction>(event: FunctionUrlEvent, fn: F): Routed<RouteNameOf<F>> {
  const path = normalisedPath(event);
  const served = ENTRIES.filter(
    ([, route]) =>
      route.fn === fn &&
      (route.prefix ? path.startsWith(route.path) && path.length > route.path.length : path === route.path),
  );
  if (served.length === 0) throw noSuchEndpoint(event.rawPath);
  const method = event.requestContext.http.method;
  const found = served.find(([, route]) => route.method === method);
  if (!found) throw new MethodNotAllowedError(method, [...new Set(served.map(([, route]) => route.method))]);
  const [name, route] = found;
  return { name: name as RouteNameOf<F>, route, rest: route.prefix ? path.slice(route.path.length) : '' };
}

/** The Lambda context of a routed invocation. */
export interface RoutedContext<F extends ApiFunction = ApiFunction> extends Context {
  routed: Routed<RouteNameOf<F>>;
}

/** Routes the request (routeOf) for the rest of the chain and the handler. */
export function route<F extends ApiFunction>(
  fn: F,
): MiddlewareObj<FunctionUrlEvent, FunctionUrlResult, Error, RoutedContext<F>> {
  return {
    before: function routeBefore(request) {
      request.context.routed = routeOf(request.event, fn);
    },
  };
}
