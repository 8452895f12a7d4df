/**
 * CORS as OpenAI and OpenRouter answer it, so that browser clients (the OpenAI SDK with
 * `dangerouslyAllowBrowser`, the AI SDK) can call the service: a preflight (`OPTIONS`) is answered
 * 204 before routing or authentication, and every response, errors and streams included, allows any
 * origin and exposes the headers clients read. Any origin is safe here: a request is authorised by its
 * Bearer key, never by a cookie, so no credentials are allowed.
 */
import type { MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import { type FunctionUrlEvent, type FunctionUrlResult, header } from './http.js';

/**
 * The response headers a client may read (and the SDKs do: request and generation ids, retries; a
 * 402's top-up link and balance).
 */
export const EXPOSED_HEADERS =
  'x-request-id, x-generation-id, x-dropped-fields, retry-after, link, x-credit-balance';
const PREFLIGHT_MAX_AGE_SECONDS = 86_400;

export function cors(): MiddlewareObj<FunctionUrlEvent, FunctionUrlResult, Error, Context> {
  const addHeaders = (request: { response?: FunctionUrlResult | null | undefined }) => {
    if (!request.response) return;
    request.response.headers = {
      ...request.response.headers,
      'access-control-allow-origin': '*',
      'access-control-expose-headers': EXPOSED_HEADERS,
    };
  };
  return {
    before: function corsBefore(request) {
      if (request.event.requestContext.http.method !== 'OPTIONS') return;
      // A preflight: which methods and headers a request may use. Answered without a key.
      return {
        statusCode: 204,
        headers: {
          'access-control-allow-origin': '*',
          'access-control-allow-methods': 'GET, POST, OPTIONS',
          'access-control-allow-headers':
            header(request.event, 'access-control-request-headers') ?? 'authorization, content-type',
          'access-control-max-age': String(PREFLIGHT_MAX_AGE_SECONDS),
          vary: 'Origin, Access-Control-Request-Headers',
        },
        body: '',
      };
    },
    after: addHeaders,
    onError: addHeaders,
  };
}
