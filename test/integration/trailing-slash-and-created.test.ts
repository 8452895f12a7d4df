import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTarget, type Target } from '../support/target.js';

/**
 * One rule for trailing slashes on every route; a generation's `created` is its own time; a base URL
 * without /api/v1 (or with a part of it) is told where the API is, with a key or without one.
 */
let target: Target;
beforeAll(async () => {
  target = await startTarget();
});
afterAll(async () => {
  await target?.stop();
});

describe('paths and times as a newcomer meets them', () => {
  it.each(['/chat/completions/', '/chat/completions'])('POST %s is served', async (path) => {
    const { key } = await newAccount(target);
    const response = await fetch(`${target.baseUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'svc-fast',
        messages: [{ role: 'user', content: 'hi [[sim:tokens=2]]' }],
      }),
    });
    expect(response.status).toBe(200);
    await response.json();
  });

  it.each(['/models/', '/credits/', '/models/svc-fast/'])('GET %s is served', async (path) => {
    const { key } = await newAccount(target);
    const response = await fetch(`${target.baseUrl}${path}`, { headers: { authorization: `Bearer ${key}` } });
    expect(response.status).toBe(200);
    await response.json();
  });

  it("GET /generation reports created as the generation's own time, the one its id carries", async () => {
    const { key } = await newAccount(target);
    // A reply that takes a while: settled well after the generation started.
    const reply = await fetch(`${target.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'svc-fast',
        messages: [{ role: 'user', content: 'hi [[sim:tokens=2]] [[sim:first_byte_delay_ms=1500]]' }],
      }),
    });
    const body = (await reply.json()) as { id: string; created: number };
    const idSeconds = Number(body.id.split('-')[1]);
    expect(body.created).toBe(idSeconds);
    const generation = await fetch(`${target.baseUrl}/generation?id=${body.id}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(generation.status).toBe(200);
    expect(((await generation.json()) as { created: number }).created).toBe(idSeconds);
  });
});

describe('a base URL without /api/v1', () => {
  const origin = () => new URL(target.baseUrl).origin;
  const said = (path: string, use: string) =>
    `No such endpoint: ${path}. This API is served under /api/v1: use ${use} (an OpenAI SDK's baseURL ends in /api/v1).`;

  it.each([
    ['GET', '/', 'POST /api/v1/chat/completions or GET /api/v1/models'],
    ['POST', '/chat/completions', '/api/v1/chat/completions'],
    ['POST', '/api/chat/completions', '/api/v1/chat/completions'],
    ['POST', '/v1/chat/completions', '/api/v1/chat/completions'],
    ['GET', '/models', '/api/v1/models'],
    ['GET', '/api/key', '/api/v1/key'],
  ])('%s %s is a 404 naming the API path, with a key and without one', async (method, path, use) => {
    const { key } = await newAccount(target);
    const invocations = () =>
      ['models', 'completions'].map((fn) => target.local?.emulator.stats(fn).invocations);
    for (const headers of [{}, { authorization: `Bearer ${key}` }]) {
      const before = invocations();
      const response = await fetch(`${origin()}${path}`, {
        method,
        headers: { ...headers, 'content-type': 'application/json' },
        ...(method === 'POST'
          ? { body: '{"model":"svc-fast","messages":[{"role":"user","content":"hi"}]}' }
          : {}),
      });
      expect(response.status, JSON.stringify(headers)).toBe(404);
      expect(response.headers.get('access-control-allow-origin')).toBe('*');
      expect(response.headers.get('x-request-id')).toBeTruthy();
      expect(await response.json()).toEqual({
        error: { message: said(path, use), type: 'invalid_request_error', param: null, code: 'not_found' },
      });
      // Without a key the edge answers it (no function runs); with one, the function's router does.
      if (!('authorization' in headers)) expect(invocations()).toEqual(before);
    }
  });

  it("is an OpenAI SDK's NotFoundError whose message says to use /api/v1", async () => {
    const { key } = await newAccount(target);
    for (const baseURL of [origin(), `${origin()}/api`]) {
      const client = new OpenAI({ baseURL, apiKey: key, maxRetries: 0 });
      const error = await client.chat.completions
        .create({ model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }] })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(error, baseURL).toBeInstanceOf(OpenAI.NotFoundError);
      expect((error as Error).message).toContain('use /api/v1/chat/completions');
    }
  });
});
