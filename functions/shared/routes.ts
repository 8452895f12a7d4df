/**
 * Every route of the API, in one table: its method, its path, the function that serves it (by the
 * name it is deployed under: the account function is "models") and what the caller must bring. Each
 * function dispatches from it (routing.ts: 404, 405, the route's authentication), the CDK stack builds
 * CloudFront's behaviours from it and the local emulator routes by those (lib/infra/edge-routes.ts).
 * Plain data, importing nothing: the stack and the emulator read it without taking function code.
 *
 * One rule for trailing slashes on every route: they are ignored.
 */

/** The functions that serve the API, by the name each is deployed under. */
export type ApiFunction = 'completions' | 'models';

/**
 * What the caller must bring: `key`, an active key of an active account (401, 403 otherwise);
 * `key+credit`, and available credit as well (402 without), for a request that spends money.
 */
type RouteAuth = 'key' | 'key+credit';

export interface Route {
  method: 'GET' | 'POST';
  /** The exact path, or a prefix (ending in `/`) whose rest the route answers about. */
  path: string;
  prefix?: true;
  fn: ApiFunction;
  auth: RouteAuth;
}

/** In the order they are matched (and CloudFront's behaviours are listed); any other path is 404. */
export const ROUTES = {
  chatCompletions: {
    method: 'POST',
    path: '/api/v1/chat/completions',
    fn: 'completions',
    auth: 'key+credit',
  },
  models: { method: 'GET', path: '/api/v1/models', fn: 'models', auth: 'key' },
  model: { method: 'GET', path: '/api/v1/models/', prefix: true, fn: 'models', auth: 'key' },
  credits: { method: 'GET', path: '/api/v1/credits', fn: 'models', auth: 'key' },
  key: { method: 'GET', path: '/api/v1/key', fn: 'models', auth: 'key' },
  // OpenRouter's older path of the same answer, which its older clients still call.
  authKey: { method: 'GET', path: '/api/v1/auth/key', fn: 'models', auth: 'key' },
  generation: { method: 'GET', path: '/api/v1/generation', fn: 'models', auth: 'key' },
} as const satisfies Record<string, Route>;

export type RouteName = keyof typeof ROUTES;

/** The routes one function serves, by name. */
export type RouteNameOf<F extends ApiFunction> = {
  [N in RouteName]: (typeof ROUTES)[N]['fn'] extends F ? N : never;
}[RouteName];
