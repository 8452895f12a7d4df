import { Function as CloudFrontFunction, FunctionCode, FunctionRuntime } from 'aws-cdk-lib/aws-cloudfront';
import type { Construct } from 'constructs';
import { EXPOSED_HEADERS } from '../../functions/shared/cors.js';
import { MAX_REQUEST_BYTES, tooLargeBody } from '../../functions/shared/too-large.js';

/**
 * The viewer-request code: a body whose Content-Length exceeds what a Function URL takes is answered
 * 413 here, in OpenAI's error shape with a request id, since Lambda refuses it before the function
 * runs, with a bare `{"message":"Request Entity Too Large"}`. Everything else goes on unchanged. The
 * body is the one the local emulator sends (functions/shared/too-large.ts). A chunked body has no
 * Content-Length: Lambda's own answer still applies to it.
 */
export function tooLargeFunctionCode(maxBytes = MAX_REQUEST_BYTES): string {
  return `function handler(event) {
  var length = event.request.headers['content-length'];
  if (!length || !(parseInt(length.value, 10) > ${maxBytes})) return event.request;
  return {
    statusCode: 413,
    statusDescription: 'Payload Too Large',
    headers: {
      'content-type': { value: 'application/json' },
      'x-request-id': { value: event.context.requestId },
      'access-control-allow-origin': { value: '*' },
      'access-control-expose-headers': { value: ${JSON.stringify(EXPOSED_HEADERS)} }
    },
    body: { encoding: 'text', data: ${JSON.stringify(JSON.stringify(tooLargeBody(maxBytes)))} }
  };
}`;
}

export function tooLargeFunction(scope: Construct): CloudFrontFunction {
  return new CloudFrontFunction(scope, 'TooLarge', {
    comment: 'Answers oversized request bodies 413 in the API error shape',
    runtime: FunctionRuntime.JS_2_0,
    code: FunctionCode.fromInline(tooLargeFunctionCode()),
  });
}
