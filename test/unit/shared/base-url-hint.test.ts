import { describe, expect, it } from 'vitest';
import { HttpError } from '../../../functions/core/errors.js';
import type { FunctionUrlEvent } from '../../../functions/shared/http.js';
import { ROUTES, type Route } from '../../../functions/shared/routes.js';
import { routeOf } from '../../../functions/shared/routing.js';

/**
 * A client set up with the wrong base URL (the host alone, `/api`, OpenAI's `/v1`) sends the API's
 * paths without /api/v1 or under a part of it: each function's router answers 404 in OpenAI's shape
 * with a message that says where the API is, and what to call instead.
 */
const eventAt = (rawPath: string, method = 'GET') =>
  ({ rawPath, headers: {}, requestContext: { http: { method } } }) as unknown as FunctionUrlEvent;

function refusal(path: string, fn: 'models' | 'completions' = 'models', method = 'GET'): HttpError {
  try {
    routeOf(eventAt(path, method), fn);
  } catch (error) {
    if (error instanceof HttpError) return error;
    throw error;
  }
  throw new Error(`${path} was routed`);
}

const hint = (path: string, use: string) =>
  `No such endpoint: ${path}. This API is served under /api/v1: use ${use} (an OpenAI SDK's baseURL ends in /api/v1).`;

describe("a path of the API under the wrong base URL is a 404 that names the API's base", () => {
  it.each([
    ['/chat/completions', 'POST', '/api/v1/chat/completions'],
    ['/chat/completions/', 'POST', '/api/v1/chat/completions'],
    ['/api/chat/completions', 'POST', '/api/v1/chat/completions'],
    ['/v1/chat/completions', 'POST', '/api/v1/chat/completions'],
    ['/api/v1/v1/chat/completions', 'POST', '/api/v1/chat/completions'],
    ['/v1/api/v1/chat/completions', 'POST', '/api/v1/chat/completions'],
    ['/models', 'GET', '/api/v1/models'],
    ['/api/models', 'GET', '/api/v1/models'],
    ['/models/svc-fast', 'GET', '/api/v1/models/svc-fast'],
    ['/v1/models/svc-pro/', 'GET', '/api/v1/models/svc-pro'],
    ['/credits', 'GET', '/api/v1/credits'],
    ['/key', 'GET', '/api/v1/key'],
    ['/auth/key', 'GET', '/api/v1/auth/key'],
    ['/api/generation', 'GET', '/api/v1/generation'],
  ])('%s (%s): use %s', (path, method, use) => {
    for (const fn of ['models', 'completions'] as const) {
      const error = refusal(path, fn, method);
      expect(error.statusCode).toBe(404);
      expect(error.toBody()).toEqual({
        error: { message: hint(path, use), type: 'invalid_request_error', param: null, code: 'not_found' },
      });
    }
  });

  it.each(['/', '/api', '/api/', '/v1', '/api/v1', '/api/v1/'])(
    'at the base alone (%s), names the first routes',
    (path) => {
      expect(refusal(path).message).toBe(hint(path, 'POST /api/v1/chat/completions or GET /api/v1/models'));
      expect(refusal(path, 'models', 'POST').statusCode).toBe(404);
    },
  );

  it('covers every route of the table: each path without its /api/v1 is told its place', () => {
    for (const route of Object.values<Route>(ROUTES)) {
      const tail = route.path.slice('/api/v1'.length) + (route.prefix ? 'svc-fast' : '');
      expect(refusal(tail, 'models', route.method).message).toBe(hint(tail, `/api/v1${tail}`));
    }
  });

  it('shows a long path cut, and what to use cut too', () => {
    const long = `/models/${'m'.repeat(300)}`;
    const use = `/api/v1${long}`;
    expect(refusal(long).message).toBe(hint(`${long.slice(0, 200)}...`, `${use.slice(0, 200)}...`));
  });

  it('leaves paths that are not the API under a wrong base a plain 404', () => {
    for (const path of ['/v2/models', '/v1x', '/foo/chat/completions', '/api/v1/agent/run', '/favicon.ico'])
      expect(refusal(path).message).toBe(`No such endpoint: ${path}`);
    // The API's own paths are routed, not hinted at.
    expect(routeOf(eventAt('/api/v1/models'), 'models').name).toBe('models');
    expect(routeOf(eventAt('/api/v1/auth/key'), 'models').name).toBe('authKey');
  });
});
