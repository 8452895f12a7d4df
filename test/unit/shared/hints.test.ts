import { describe, expect, it } from 'vitest';
import { parseBearerKey } from '../../../functions/core/auth.js';
import { BadRequestError, type HttpError } from '../../../functions/core/errors.js';
import { parseChatRequest } from '../../../functions/core/schemas.js';
import type { FunctionUrlEvent } from '../../../functions/shared/http.js';
import { routeOf } from '../../../functions/shared/routing.js';

/** What a client with OpenAI's habits gets wrong first, each answered with what to do instead. */
function thrown(run: () => unknown): HttpError {
  try {
    run();
  } catch (error) {
    return error as HttpError;
  }
  throw new Error('expected an error');
}

const eventAt = (rawPath: string, method = 'POST') =>
  ({ rawPath, requestContext: { http: { method } } }) as unknown as FunctionUrlEvent;

describe('a path under /v1 without /api', () => {
  it.each([
    ['the completions function', () => routeOf(eventAt('/v1/chat/completions'), 'completions')],
    ['the account function', () => routeOf(eventAt('/v1/chat/completions'), 'models')],
  ])('is a 404 that says to use /api/v1 (%s)', (_where, run) => {
    const error = thrown(run);
    expect(error.statusCode).toBe(404);
    expect(error.message).toBe(
      "No such endpoint: /v1/chat/completions. This API is served under /api/v1: use /api/v1/chat/completions (an OpenAI SDK's baseURL ends in /api/v1).",
    );
  });

  it('leaves other unknown paths a plain 404', () => {
    expect(thrown(() => routeOf(eventAt('/v2/models', 'GET'), 'models')).message).toBe(
      'No such endpoint: /v2/models',
    );
    expect(thrown(() => routeOf(eventAt('/v1x', 'GET'), 'models')).message).toBe('No such endpoint: /v1x');
  });
});

describe('a key sent without "Bearer "', () => {
  const key = `svc_live_${'a'.repeat(43)}`;
  it.each([key, ` ${key} `, 'svc_live_short'])(
    'is a 401 that says to add "Bearer " (%s), never echoing it',
    (header) => {
      const error = thrown(() => parseBearerKey(header));
      expect(error.statusCode).toBe(401);
      expect(error.message).toMatch(/add "Bearer " before it/);
      expect(error.message).not.toContain('aaaa');
      expect(error.code).toBe('invalid_authorization_scheme');
    },
  );

  it('still takes the key with its scheme', () => {
    expect(parseBearerKey(`Bearer ${key}`)).toBe(key);
  });
});

describe('array limits named in the message', () => {
  const body = (field: string) => `{"model":"svc-fast","messages":[{"role":"user","content":"hi"}],${field}}`;
  it.each([
    [body('"stop":["a","b","c","d","e"]'), 'stop', "Invalid 'stop': 5 items; at most 4 are allowed."],
    [body('"stop":[]'), 'stop', "Invalid 'stop': 0 items; at least 1 is required."],
    [
      '{"model":"svc-fast","messages":[]}',
      'messages',
      "Invalid 'messages': 0 items; at least 1 is required.",
    ],
  ])('%s', (text, param, message) => {
    const error = thrown(() => parseChatRequest(text));
    expect(error).toBeInstanceOf(BadRequestError);
    expect(error.param).toBe(param);
    expect(error.message).toBe(message);
    expect(error.code).toBe('out_of_range');
  });
});
