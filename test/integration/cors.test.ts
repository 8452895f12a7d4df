import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { preflightHeaders } from '../../functions/shared/cors.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

/**
 * Browser clients: preflights answered at the edge without a key (no function invoked), CORS headers
 * on every response, streams and errors too.
 */
let target: Target;
beforeAll(async () => {
  target = await startTarget();
});
afterAll(async () => {
  await target?.stop();
});

const ORIGIN = 'https://app.example.com';

function expectCors(response: Response) {
  expect(response.headers.get('access-control-allow-origin')).toBe('*');
  const exposed = response.headers.get('access-control-expose-headers') ?? '';
  for (const name of ['x-request-id', 'x-generation-id']) expect(exposed).toContain(name);
}

describe('CORS', () => {
  it.each(['/chat/completions', '/models'])(
    "answers a preflight to %s at the edge without a key: 204, the functions' headers, no invocation",
    async (path) => {
      const FUNCTIONS = ['completions', 'models'];
      const stats = () =>
        FUNCTIONS.map((fn) => {
          const { invocations, coldStarts } = target.local?.emulator.stats(fn) ?? {};
          return { fn, invocations, coldStarts };
        });
      const before = stats();
      const requested = 'authorization, content-type, x-stainless-os';
      const response = await fetch(`${target.baseUrl}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin: ORIGIN,
          'access-control-request-method': 'POST',
          'access-control-request-headers': requested,
        },
      });
      expect(response.status).toBe(204);
      for (const [name, value] of Object.entries(preflightHeaders(requested)))
        expect(response.headers.get(name), name).toBe(value);
      expect(await response.text()).toBe('');
      expect(stats()).toEqual(before);
    },
  );

  it('puts the headers on a stream', async () => {
    const { key } = await newAccount(target);
    const response = await fetch(`${target.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { origin: ORIGIN, authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }], stream: true }),
    });
    expect(response.status).toBe(200);
    expectCors(response);
    expect(await response.text()).toContain('data: [DONE]');
  });

  it.each([
    ['a 401', '/chat/completions', 'POST'],
    ['a 404', '/chat/nothing', 'POST'],
    ['the model list', '/models', 'GET'],
    ['a 401 of the models function', '/credits', 'GET'],
  ])('puts the headers on %s', async (_name, path, method) => {
    const response = await fetch(`${target.baseUrl}${path}`, {
      method,
      headers: {
        origin: ORIGIN,
        ...(path === '/models' ? { authorization: `Bearer ${(await newAccount(target)).key}` } : {}),
      },
      ...(method === 'POST' ? { body: '{}' } : {}),
    });
    expectCors(response);
    await response.arrayBuffer();
  });
});
