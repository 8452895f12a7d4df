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

/**
 * A preflight's answer headers (204, no body): which methods and headers a request may use, for the
 * headers the browser asked for (`Access-Control-Request-Headers`), or the two every call needs. The
 * viewer-request CloudFront Function answers a preflight with these too (lib/infra/edge-function.ts).
 */
export function preflightHeaders(requestedHeaders: string | undefined): Record<string, string> {
  return {
    'access-control-allow-origin': '*',
    'access-control-allow-methods': 'GET, POST, OPTIONS',
    'access-control-allow-headers': requestedHeaders ?? 'authorization, content-type',
    'access-control-max-age': String(PREFLIGHT_MAX_AGE_SECONDS),
    vary: 'Origin, Access-Control-Request-Headers',
  };
}

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
        headers: preflightHeaders(header(request.event, 'access-control-request-headers')),
        body: '',
      };
    },
    after: addHeaders,
    onError: addHeaders,
  };
}
