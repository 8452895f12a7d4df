/**
 * The answer to a request body larger than a Function URL takes (6 MB), given in front of the
 * function since Lambda refuses such a request before the function runs: OpenAI's error shape, a
 * request id and the CORS headers, like every other answer. The local emulator sends it; in AWS a
 * CloudFront function sends the same body (lib/infra/edge-function.ts), built from this one.
 */
import { EXPOSED_HEADERS } from './cors.js';

/** What a Function URL takes: 6 MB of request payload. */
export const MAX_REQUEST_BYTES = 6 * 1024 * 1024;

export function tooLargeBody(maxBytes: number) {
  return {
    error: {
      message: `The request body is larger than the ${maxBytes} bytes (6 MB) the service takes.`,
      type: 'invalid_request_error',
      param: null,
      code: 'request_too_large',
    },
  };
}

export function requestTooLarge(requestId: string, maxBytes = MAX_REQUEST_BYTES) {
  return {
    statusCode: 413,
    headers: {
      'content-type': 'application/json',
      'x-request-id': requestId,
      'access-control-allow-origin': '*',
      'access-control-expose-headers': EXPOSED_HEADERS,
    },
    body: JSON.stringify(tooLargeBody(maxBytes)),
  };
}
