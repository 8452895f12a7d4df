import { runInNewContext } from 'node:vm';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseBearerKey } from '../../functions/core/auth.js';
import { cors } from '../../functions/shared/cors.js';
import {
  type FunctionUrlEvent,
  type FunctionUrlResult,
  header,
  httpErrorHandler,
} from '../../functions/shared/http.js';
import type { ApiFunction } from '../../functions/shared/routes.js';
import { routeOf } from '../../functions/shared/routing.js';
import { MAX_REQUEST_BYTES, requestTooLarge } from '../../functions/shared/too-large.js';
import { dashboardHostCode, edgeFunctionCode } from '../../lib/infra/edge-function.js';
import { edgeFunctionFor, KEY_CHECKED } from '../../lib/infra/edge-routes.js';

const KEY = `svc_live_${'a1B2'.repeat(10)}xyz`;
const REQUEST_ID = 'cf-req-1';

interface EdgeResponse {
  statusCode: number;
  headers: Record<string, { value: string }>;
  body: { encoding: string; data: string };
}

/** The CloudFront function's code, run as CloudFront runs it: a `handler(event)` in a bare context. */
const edge = runInNewContext(`${edgeFunctionCode()}; handler`) as (event: unknown) => unknown;
function run(headers: Record<string, { value: string }>, method = 'POST', uri = '/api/v1/chat/completions') {
  const request = { method, uri, querystring: {}, headers, cookies: {} };
  return { request, result: edge({ version: '1.0', request, context: { requestId: REQUEST_ID } }) };
}
const flat = (response: EdgeResponse) =>
  Object.fromEntries(Object.entries(response.headers).map(([k, v]) => [k, v.value]));

/** What a function answers for this Authorization header: its own key parse, CORS and error handling. */
const functionAnswer = middy<FunctionUrlEvent, FunctionUrlResult>()
  .use(cors())
  .use(httpErrorHandler())
  .handler(async (event) => {
    parseBearerKey(header(event, 'authorization'));
    return { statusCode: 200, headers: {}, body: '' };
  });
async function functionSays(authorization: string | undefined) {
  const event = {
    rawPath: '/api/v1/models',
    headers: authorization === undefined ? {} : { authorization },
    requestContext: { http: { method: 'GET' } },
  } as unknown as FunctionUrlEvent;
  return functionAnswer(event, { awsRequestId: REQUEST_ID } as Context);
}

/** The edge's answer equals the function's: passes exactly when the function accepts, else the same 401. */
async function expectSameAnswer(authorization: string | undefined) {
  const { request, result } = run(
    authorization === undefined ? {} : { authorization: { value: authorization } },
  );
  const local = await functionSays(authorization);
  if (local.statusCode === 200) {
    expect(result, authorization).toBe(request);
    return;
  }
  const response = result as EdgeResponse;
  expect(response.statusCode, authorization).toBe(local.statusCode);
  expect(JSON.parse(response.body.data)).toEqual(JSON.parse(local.body as string));
  expect(flat(response)).toEqual(local.headers);
}

describe('the viewer-request CloudFront function: the key', () => {
  it.each([
    ['no Authorization header', undefined],
    ['an empty one', ''],
    ['the scheme alone', 'Bearer'],
    ['another scheme', 'Basic dXNlcjpwYXNz'],
    ['a scheme longer than the message repeats', `X${'y'.repeat(60)} token`],
    ['a short key', 'Bearer svc_live_tooshort'],
    ['a key of another prefix', `Bearer sk_live_${'a'.repeat(43)}`],
    ['a key and more', `Bearer ${KEY} extra`],
    ['a key one character long', `Bearer ${KEY}x`],
  ])('refuses %s with the 401 the function gives: OpenAI shape, request id, CORS', async (_name, value) => {
    const { result } = run(value === undefined ? {} : { authorization: { value } });
    expect((result as EdgeResponse).statusCode).toBe(401);
    await expectSameAnswer(value);
  });

  it.each([
    ['Bearer', `Bearer ${KEY}`],
    ['bearer in lower case', `bearer ${KEY}`],
    ['extra spaces', `Bearer   ${KEY}  `],
  ])('passes a well-formed key (%s) through unchanged', async (_name, value) => {
    const { request, result } = run({ authorization: { value } });
    expect(result).toBe(request);
    await expectSameAnswer(value);
  });

  it('decides as the function does for any header a client may send', async () => {
    const part = fc.constantFrom(
      'Bearer',
      'bearer',
      'BEARER',
      'Basic',
      'svc_live_',
      KEY,
      ' ',
      '  ',
      '\t',
      'x',
    );
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.array(part, { maxLength: 5 }).map((parts) => parts.join('')),
          fc.string({ maxLength: 80 }),
        ),
        expectSameAnswer,
      ),
      { numRuns: 500 },
    );
  });

  it('fits CloudFront Functions\' size quota (10 KB of code: CloudFront Developer Guide, "Quotas on functions")', () => {
    expect(Buffer.byteLength(edgeFunctionCode())).toBeLessThan(10 * 1024);
  });
});

describe('the viewer-request CloudFront function: a CORS preflight', () => {
  /** What a function answers a preflight asking for these headers (its CORS middleware, before any key). */
  async function functionPreflight(requested: string | undefined) {
    const event = {
      rawPath: '/api/v1/chat/completions',
      headers: {
        'access-control-request-method': 'POST',
        ...(requested === undefined ? {} : { 'access-control-request-headers': requested }),
      },
      requestContext: { http: { method: 'OPTIONS' } },
    } as unknown as FunctionUrlEvent;
    return functionAnswer(event, { awsRequestId: REQUEST_ID } as Context);
  }

  /** The edge answers the preflight itself, with the function's status and exactly its headers, no body. */
  async function expectSamePreflight(
    requested: string | undefined,
    others: Record<string, { value: string }> = {},
  ) {
    const { result } = run(
      {
        ...others,
        'access-control-request-method': { value: 'POST' },
        ...(requested === undefined ? {} : { 'access-control-request-headers': { value: requested } }),
      },
      'OPTIONS',
    );
    const local = await functionPreflight(requested);
    const response = result as EdgeResponse;
    expect(response.statusCode, requested).toBe(204);
    expect(response.statusCode, requested).toBe(local.statusCode);
    expect(flat(response), requested).toEqual(local.headers);
    expect(response.body, requested).toBeUndefined();
    expect(local.body).toBe('');
  }

  it.each([
    ['the headers the OpenAI SDK asks for', 'authorization, content-type, x-stainless-os'],
    ['no Access-Control-Request-Headers', undefined],
    ['an empty one', ''],
  ])('answers it itself, 204 with the headers the function gives (%s)', async (_name, requested) => {
    await expectSamePreflight(requested);
  });

  it('answers it whatever key and body length the preflight carries', async () => {
    for (const others of [
      {},
      { authorization: { value: `Bearer ${KEY}` } },
      { authorization: { value: 'Basic dXNlcjpwYXNz' } },
      { 'content-length': { value: String(MAX_REQUEST_BYTES + 1) } },
    ])
      await expectSamePreflight('authorization, content-type', others);
  });

  it('answers as the function does for any headers a browser may ask for', async () => {
    const name = fc.constantFrom('authorization', 'content-type', 'x-stainless-os', 'X-Custom', ' ', ',');
    await fc.assert(
      fc.asyncProperty(
        fc.option(
          fc.oneof(
            fc.array(name, { maxLength: 6 }).map((names) => names.join(', ')),
            fc.string({ maxLength: 80 }),
          ),
          { nil: undefined },
        ),
        (requested) => expectSamePreflight(requested),
      ),
      { numRuns: 300 },
    );
  });
});

describe('the viewer-request CloudFront function: the body size', () => {
  const withKey = (headers: Record<string, { value: string }>) => ({
    authorization: { value: `Bearer ${KEY}` },
    ...headers,
  });

  it('answers a body over 6 MB as the local emulator does: 413, OpenAI shape, request id, CORS', () => {
    const { result } = run(withKey({ 'content-length': { value: String(MAX_REQUEST_BYTES + 1) } }));
    const local = requestTooLarge(REQUEST_ID);
    const response = result as EdgeResponse;
    expect(response.statusCode).toBe(413);
    expect(JSON.parse(response.body.data)).toEqual(JSON.parse(local.body));
    expect(flat(response)).toEqual(local.headers);
  });

  it.each([
    ['at the limit', { 'content-length': { value: String(MAX_REQUEST_BYTES) } }],
    ['small', { 'content-length': { value: '120' } }],
    ['without a length', {}],
    ['with a length that is not a number', { 'content-length': { value: 'lots' } }],
  ])('passes a request %s through unchanged', (_name, headers) => {
    const { request, result } = run(withKey(headers));
    expect(result).toBe(request);
  });
});

describe('the viewer-request CloudFront function: a wrong base URL', () => {
  /** What the function CloudFront sends `path` to answers, keyless: its router (before any key), CORS, errors. */
  async function functionAt(path: string, method: string) {
    const routed = middy<FunctionUrlEvent, FunctionUrlResult>()
      .use(cors())
      .use(httpErrorHandler())
      .handler(async (event) => {
        const fn = edgeFunctionFor(path);
        if (!KEY_CHECKED[fn]) throw new Error(`${path} is the site's, not the API's`);
        routeOf(event, fn as ApiFunction);
        parseBearerKey(header(event, 'authorization'));
        return { statusCode: 200, headers: {}, body: '' };
      });
    const event = {
      rawPath: path,
      headers: {},
      requestContext: { http: { method } },
    } as unknown as FunctionUrlEvent;
    return routed(event, { awsRequestId: REQUEST_ID } as Context);
  }

  /**
   * Keyless, the edge answers as the function would where its router says where the API is (its 404
   * naming /api/v1), and the function's 401 for a missing key anywhere else (a route or a plain 404).
   */
  async function expectSameKeyless(path: string, method = 'GET') {
    const response = run({}, method, path).result as EdgeResponse;
    const routed = await functionAt(path, method);
    const hinted = routed.statusCode === 404 && (routed.body as string).includes('served under /api/v1');
    const local = hinted ? routed : await functionSays(undefined);
    expect(response.statusCode, path).toBe(local.statusCode);
    expect(JSON.parse(response.body.data), path).toEqual(JSON.parse(local.body as string));
    expect(flat(response), path).toEqual(local.headers);
    return response;
  }

  it.each([
    ['/', 'GET'],
    ['/chat/completions', 'POST'],
    ['/api/chat/completions', 'POST'],
    ['/v1/chat/completions', 'POST'],
    ['/models', 'GET'],
    ['/v1/models/svc-fast/', 'GET'],
    ['/api', 'GET'],
    ['/auth/key', 'GET'],
  ])(
    'answers %s (%s) without a key 404, with the message that names /api/v1, as the function does',
    async (path, method) => {
      const response = await expectSameKeyless(path, method);
      expect(response.statusCode).toBe(404);
      expect(JSON.parse(response.body.data).error.message).toMatch(
        /This API is served under \/api\/v1: use .*\/api\/v1/,
      );
    },
  );

  it.each(['/api/v1/models', '/api/v1/auth/key', '/api/v1/models/gpt-4o', '/favicon.ico', '/v2/models'])(
    'still answers %s without a key 401',
    async (path) => {
      expect((await expectSameKeyless(path)).statusCode).toBe(401);
    },
  );

  it('passes a request with a key through, whatever its path: the function answers it', () => {
    const { request, result } = run(
      { authorization: { value: `Bearer ${KEY}` } },
      'GET',
      '/chat/completions',
    );
    expect(result).toBe(request);
  });

  it('decides as the function does for any path a client may send', async () => {
    const part = fc.constantFrom(
      '/',
      '/api',
      '/v1',
      '/v2',
      '/chat',
      '/completions',
      '/chat/completions',
      '/models',
      '/svc-fast',
      '/key',
      '/auth',
      '/credits',
      '/generation',
      'x',
      '%2F',
      '.',
    );
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.array(part, { maxLength: 6 }).map((parts) => `/${parts.join('')}`.replace(/^\/\//, '/')),
          fc.webPath().map((path) => path || '/'),
          fc.constantFrom('/models/', '/v1/').map((base) => `${base}${'m'.repeat(300)}`),
        ),
        fc.constantFrom('GET', 'POST'),
        async (path, method) => {
          await expectSameKeyless(path, method);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe("the dashboard's viewer-request CloudFront function: another host name to the custom domain", () => {
  const DOMAIN = 'api.acme.com';
  /** The code as CloudFront runs it, for a request with this Host (absent: none), method, path and query. */
  const host = runInNewContext(`${dashboardHostCode(DOMAIN)}; handler`) as (event: unknown) => unknown;
  function visit(
    hostName: string | undefined,
    method: string,
    uri: string,
    querystring: Record<string, { value: string; multiValue?: { value: string }[] }> = {},
  ) {
    const headers = hostName === undefined ? {} : { host: { value: hostName } };
    const request = { method, uri, querystring, headers, cookies: {} };
    return { request, result: host({ version: '1.0', request, context: { requestId: REQUEST_ID } }) };
  }
  const location = (result: unknown) => (result as EdgeResponse).headers.location?.value;

  it.each(['GET', 'HEAD'])(
    "answers %s on the distribution's own name 301 to the same path on the domain",
    (method) => {
      for (const uri of ['/dashboard', '/dashboard/', '/dashboard/billing', '/dashboard/callback']) {
        const { result } = visit('d111111abcdef8.cloudfront.net', method, uri);
        expect((result as EdgeResponse).statusCode, uri).toBe(301);
        expect(location(result), uri).toBe(`https://${DOMAIN}${uri}`);
      }
    },
  );

  it.each(['POST', 'PUT', 'DELETE', 'OPTIONS'])(
    'answers %s 308, which keeps the method and body',
    (method) => {
      const { result } = visit('d111111abcdef8.cloudfront.net', method, '/dashboard/keys');
      expect((result as EdgeResponse).statusCode).toBe(308);
      expect((result as EdgeResponse).body).toBeUndefined();
      expect(location(result)).toBe(`https://${DOMAIN}/dashboard/keys`);
    },
  );

  it('keeps the query string: every value of a repeated name, a name without a value, as CloudFront hands them over', () => {
    const { result } = visit('d111111abcdef8.cloudfront.net', 'GET', '/dashboard/callback', {
      code: { value: 'abc' },
      state: { value: 'x%2By' },
      tier: { value: 'a', multiValue: [{ value: 'a' }, { value: 'b' }] },
      flag: { value: '' },
    });
    expect(location(result)).toBe(
      `https://${DOMAIN}/dashboard/callback?code=abc&state=x%2By&tier=a&tier=b&flag`,
    );
  });

  it('writes a space, a control character or # as %XX: a Location header cannot carry them', () => {
    const { result } = visit('d1.cloudfront.net', 'GET', '/dashboard/a b', { q: { value: 'x#y\u0001' } });
    expect(location(result)).toBe(`https://${DOMAIN}/dashboard/a%20b?q=x%23y%01`);
  });

  it('passes a request on the custom domain through unchanged, in any case and with a final dot', () => {
    for (const name of [DOMAIN, 'API.Acme.com', `${DOMAIN}.`]) {
      const { request, result } = visit(name, 'POST', '/dashboard/keys');
      expect(result, name).toBe(request);
    }
  });

  it('passes any other path through unchanged (the API is not redirected), and a request without a Host', () => {
    for (const uri of ['/api/v1/models', '/dashboards', '/stripe/webhook', '/', '/x/dashboard']) {
      const { request, result } = visit('d111111abcdef8.cloudfront.net', 'GET', uri);
      expect(result, uri).toBe(request);
    }
    const { request, result } = visit(undefined, 'GET', '/dashboard/');
    expect(result).toBe(request);
  });

  it("fits CloudFront Functions' size quota", () => {
    expect(Buffer.byteLength(dashboardHostCode(DOMAIN))).toBeLessThan(10 * 1024);
  });
});
