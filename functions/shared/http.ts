import { timingSafeEqual } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { MiddlewareObj } from '@middy/core';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import { HttpError, toHttpError } from '../core/errors.js';
import { stringifyJson } from '../core/usage.js';
import { logger, recordOriginRefused } from './observability.js';

/** A Lambda Function URL event (payload format 2.0). */
export type FunctionUrlEvent = APIGatewayProxyEventV2;

export interface FunctionUrlResult {
  statusCode: number;
  headers: Record<string, string>;
  body: string | Readable;
}

const JSON_CONTENT_TYPE = 'application/json';
export const SSE_CONTENT_TYPE = 'text/event-stream; charset=utf-8';

export function jsonResponse(
  statusCode: number,
  body: unknown,
  headers: Record<string, string> = {},
): FunctionUrlResult {
  return {
    statusCode,
    headers: { 'content-type': JSON_CONTENT_TYPE, ...headers },
    body: stringifyJson(body),
  };
}

function errorResponse(error: HttpError, requestId: string): FunctionUrlResult {
  return jsonResponse(error.statusCode, error.toBody(), { ...error.headers, 'x-request-id': requestId });
}

export function header(event: FunctionUrlEvent, name: string): string | undefined {
  return event.headers?.[name];
}

export function rawBody(event: FunctionUrlEvent): string | undefined {
  if (event.body === undefined) return undefined;
  return event.isBase64Encoded ? Buffer.from(event.body, 'base64').toString('utf8') : event.body;
}

export function requestIdOf(context: Context): string {
  return context.awsRequestId || 'unknown';
}

/**
 * The one error handler at the edge: an HttpError is answered as itself; anything else becomes a
 * generic 500 whose cause is logged, never sent.
 */
export function httpErrorHandler(): MiddlewareObj<FunctionUrlEvent, FunctionUrlResult, Error, Context> {
  return {
    onError: function httpErrorHandlerOnError(request) {
      const error = toHttpError(request.error);
      if (error.statusCode >= 500) {
        logger.error('request failed', { statusCode: error.statusCode, error: request.error ?? undefined });
      }
      request.response = errorResponse(error, requestIdOf(request.context));
    },
  };
}

/**
 * CloudFront adds a secret `x-origin-verify` header; requests that bypass it (the bare Function URL)
 * get 403, counted (`OriginRefused`). Any of the accepted values passes: the secret's current
 * version, and its previous one while a rotation reaches the distribution. None accepted: no check
 * (local use).
 */
export function originVerify(
  accepted: () => Promise<string[]>,
): MiddlewareObj<FunctionUrlEvent, FunctionUrlResult, Error, Context> {
  return {
    before: async function originVerifyBefore(request) {
      const values = await accepted();
      if (values.length === 0) return;
      const got = Buffer.from(header(request.event, 'x-origin-verify') ?? '');
      const ok = values.some(
        (want) => got.length === Buffer.byteLength(want) && timingSafeEqual(got, Buffer.from(want)),
      );
      if (!ok) {
        recordOriginRefused();
        throw new HttpError(403, 'Forbidden: call the service through its public base URL.', {
          type: 'permission_error',
          code: 'origin_not_verified',
        });
      }
    },
  };
}
