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

/** Where every path of the API starts: a client's base URL ends here. */
export const API_BASE = '/api/v1';

const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/**
 * A path of the API under a base made of `/api` and `/v1` that is not `/api/v1` itself: the base
 * missing (`/chat/completions`), or a part of it (`/api/chat/completions`, `/v1/models`), or one
 * too many (`/api/v1/v1/models`). Group 1 is the base used, group 2 the path after the base, whose
 * place is under /api/v1. Built from the route table, as the edge's copy is (lib/infra/edge-function.ts).
 */
export const MISPLACED_PATH = new RegExp(
  `^((?:/(?:api|v1))*)(${Object.values<Route>(ROUTES)
    .filter((route) => route.path.startsWith(`${API_BASE}/`))
    .map((route) => escaped(route.path.slice(API_BASE.length)) + (route.prefix ? '.+' : ''))
    .join('|')})$`,
);

/** The root, or a base made of `/api` and `/v1` alone (`/api`, `/v1`, `/api/v1`), trailing slashes cut. */
export const BASE_ONLY = /^(?:\/(?:api|v1))*$/;

/** A path under OpenAI's own base, `/v1`: its place is under /api/v1 too. */
export const UNDER_V1 = /^\/v1(\/|$)/;

/** What to use at the root: the API's first two routes. */
export const ROOT_USE = `${ROUTES.chatCompletions.method} ${ROUTES.chatCompletions.path} or ${ROUTES.models.method} ${ROUTES.models.path}`;

/** A client's path as a message shows it: at most 200 characters. */
export const SHOWN_CHARS = 200;
const shown = (path: string) =>
  path.length > SHOWN_CHARS ? `${cutToCodePoints(path, SHOWN_CHARS)}...` : path;

/** The message of a 404 at `path` that says what to use instead (`use`). */
export const baseUrlHint = (path: string, use: string) =>
  `No such endpoint: ${path}. This API is served under ${API_BASE}: use ${use} (an OpenAI SDK's baseURL ends in ${API_BASE}).`;

/**
 * What to use instead of a path no route serves, when its base URL is the mistake: the path of the
 * API it names, under /api/v1; at a base alone (`/`, `/api`, `/v1`), the API's first routes; under
 * OpenAI's `/v1`, the same path under /api. Undefined for any other path.
 */
function insteadOf(rawPath: string): string | undefined {
  const path = rawPath.replace(/\/+$/, '');
  const misplaced = MISPLACED_PATH.exec(path);
  if (misplaced && misplaced[1] !== API_BASE) return shown(`${API_BASE}${misplaced[2]}`);
  if (BASE_ONLY.test(path)) return ROOT_USE;
  if (UNDER_V1.test(rawPath)) return shown(`/api${rawPath}`);
  return undefined;
}

/**
 * The 404 of a path no route serves. A path whose base URL is wrong (OpenAI's `/v1`, none, `/api`)
 * is told where the API is: every path of this API starts at /api/v1.
 */
function noSuchEndpoint(rawPath: string): NotFoundError {
  const use = insteadOf(rawPath);
  if (use === undefined) return new NotFoundError(`No such endpoint: ${shown(rawPath)}`);
  return new NotFoundError(baseUrlHint(shown(rawPath), use));
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
