import type { Context } from 'aws-lambda';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../functions/core/access.js';
import { HttpError } from '../../functions/core/errors.js';
import { handlerChain } from '../../functions/shared/chain.js';
import type { FunctionUrlEvent, FunctionUrlResult } from '../../functions/shared/http.js';
import { type ApiFunction, ROUTES, type Route } from '../../functions/shared/routes.js';
import { routeOf } from '../../functions/shared/routing.js';
import { edgeFunctionCode } from '../../lib/infra/edge-function.js';
import { viewerRequestFunction } from '../../lib/local/cloudfront.js';
import { emulatedRoutes } from '../../lib/local/stack.js';
import { PROD_PROPS, resources, synthOffline } from './synth-offline.js';

/**
 * One route table (functions/shared/routes.ts) for everything that routes a request: every path of
 * every route, with and without its trailing slash, is sent through CloudFront's behaviours as the
 * stack synthesizes them, through the local emulator's routing, through each function's dispatch
 * and through the authentication the route names; each of them must agree with the table.
 */
const FUNCTIONS: readonly ApiFunction[] = ['completions', 'models'];
const ENTRIES = Object.entries(ROUTES) as [string, Route][];

/** The paths a route serves: its own, with a trailing slash, and (a prefix) with something after it. */
const pathsOf = (route: Route) =>
  route.prefix ? [`${route.path}svc-fast`, `${route.path}svc-fast/`] : [route.path, `${route.path}/`];

const CASES = ENTRIES.flatMap(([name, route]) => pathsOf(route).map((path) => ({ name, route, path })));

const event = (rawPath: string, method: string, headers: Record<string, string> = {}) =>
  ({ rawPath, headers, requestContext: { http: { method } } }) as unknown as FunctionUrlEvent;

/** CloudFront's path pattern (Developer Guide, "Path pattern"): `*` any run of characters, `?` one. */
const matches = (pattern: string, path: string) =>
  new RegExp(
    `^${pattern
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.')}$`,
  ).test(path);

/** The function a path reaches through the synthesized distribution: first behaviour that matches, else the default. */
function deployedRouting(): (path: string) => string {
  const all = resources(synthOffline(PROD_PROPS).template);
  const ref = (value: unknown) => JSON.stringify(value).match(/"Fn::GetAtt":\["([^"]+)"/)?.[1];
  // Each Function URL's function, named by its construct (Completions, Models).
  const urlFunction = new Map(
    Object.entries(all)
      .filter(([, r]) => r.Type === 'AWS::Lambda::Url')
      .map(([id, r]) => [
        id,
        ref(r.Properties?.TargetFunctionArn)?.startsWith('Models') ? 'models' : 'completions',
      ]),
  );
  const [distribution] = Object.values(all).filter((r) => r.Type === 'AWS::CloudFront::Distribution');
  const config = distribution?.Properties?.DistributionConfig as {
    Origins: { Id: string; DomainName: unknown }[];
    CacheBehaviors: { PathPattern: string; TargetOriginId: string }[];
    DefaultCacheBehavior: { TargetOriginId: string };
  };
  const originFunction = new Map(
    config.Origins.map((o) => [o.Id, urlFunction.get(ref(o.DomainName) ?? '') ?? `unknown origin ${o.Id}`]),
  );
  return (path) => {
    const behaviour =
      config.CacheBehaviors.find((b) => matches(b.PathPattern, path)) ?? config.DefaultCacheBehavior;
    return originFunction.get(behaviour.TargetOriginId) ?? 'none';
  };
}

function thrown(run: () => unknown): HttpError | undefined {
  try {
    run();
  } catch (error) {
    if (error instanceof HttpError) return error;
    throw error;
  }
  return undefined;
}

describe('the route table is the one source of routing', () => {
  let deployed: (path: string) => string;
  beforeAll(() => {
    deployed = deployedRouting();
  }, 120_000);

  it('lists every route the service serves', () => {
    expect(ENTRIES.map(([, r]) => `${r.method} ${r.path}${r.prefix ? '*' : ''} ${r.fn} ${r.auth}`)).toEqual([
      'POST /api/v1/chat/completions completions key+credit',
      'GET /api/v1/models models key',
      'GET /api/v1/models/* models key',
      'GET /api/v1/credits models key',
      'GET /api/v1/key models key',
      'GET /api/v1/auth/key models key',
      'GET /api/v1/generation models key',
    ]);
  });

  it.each(CASES)('CloudFront, as the stack deploys it, sends $path to its function', ({ route, path }) => {
    expect(deployed(path)).toBe(route.fn);
  });

  it.each(CASES)('the local emulator sends $path to its function', ({ route, path }) => {
    const routes = emulatedRoutes({ functions: {}, origins: {} });
    const found = routes.find((r) => r.match(path));
    expect(found?.fn.name).toBe(route.fn);
    expect(found?.fn.module).toMatch(
      route.fn === 'models' ? /functions\/account\/handler\.ts$/ : /functions\/completions\/handler\.ts$/,
    );
  });

  it.each(CASES)(
    '$path is dispatched by its function only, with 405 for another method',
    ({ name, route, path }) => {
      expect(routeOf(event(path, route.method), route.fn).name).toBe(name);
      for (const other of FUNCTIONS.filter((fn) => fn !== route.fn))
        expect(thrown(() => routeOf(event(path, route.method), other))?.statusCode).toBe(404);
      const wrong = route.method === 'GET' ? 'POST' : 'GET';
      const refused = thrown(() => routeOf(event(path, wrong), route.fn));
      expect(refused?.statusCode).toBe(405);
      expect(refused?.headers).toMatchObject({ allow: route.method });
    },
  );

  it.each(CASES)(
    '$path needs a key at the edge: 401 from the viewer-request function without one',
    ({ route, path }) => {
      const viewer = viewerRequestFunction(edgeFunctionCode());
      const answer = viewer({
        method: route.method,
        url: new URL(`https://api.example${path}`),
        headers: {},
        requestId: 'r',
      });
      expect('response' in answer && answer.response.statusCode).toBe(401);
    },
  );

  it.each(CASES)("$path asks the caller's credit only where the table says so", async ({ route, path }) => {
    const broke: Principal = {
      keyId: 'key_1',
      accountId: 'acct-1',
      keyStatus: 'active',
      accountStatus: 'active',
      balanceNano: 0n,
      heldNano: 0n,
    };
    const handled = handlerChain({
      fn: route.fn,
      store: () => ({ loadPrincipal: async () => broke }),
      topUpUrl: 'https://example.com/top-up',
    }).handler(async () => ({ statusCode: 200, headers: {}, body: '' }));
    const context = { awsRequestId: 'r', getRemainingTimeInMillis: () => 10_000 } as unknown as Context;
    const key = `svc_live_${'a'.repeat(43)}`;
    const result = (await handled(
      event(path, route.method, { authorization: `Bearer ${key}` }),
      context as never,
    )) as FunctionUrlResult;
    expect(typeof result === 'object' && result.statusCode).toBe(route.auth === 'key+credit' ? 402 : 200);
  });
});
