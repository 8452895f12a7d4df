/** What aws-lambda-ric gives a response-streaming handler (the `awslambda` global), as the bare proxies use it. */
import type { Writable } from 'node:stream';

export interface FunctionUrlEvent {
  body?: string;
  isBase64Encoded?: boolean;
}

declare const awslambda: {
  streamifyResponse(
    handler: (event: FunctionUrlEvent, responseStream: Writable) => Promise<void>,
  ): (event: FunctionUrlEvent, responseStream: Writable) => Promise<void>;
  HttpResponseStream: {
    from(stream: Writable, prelude: { statusCode: number; headers: Record<string, string> }): Writable;
  };
};

export const streamifyResponse = (
  handler: (event: FunctionUrlEvent, responseStream: Writable) => Promise<void>,
) => awslambda.streamifyResponse(handler);

export const withPrelude = (stream: Writable, statusCode: number, headers: Record<string, string>) =>
  awslambda.HttpResponseStream.from(stream, { statusCode, headers });

export const bodyOf = (event: FunctionUrlEvent) =>
  event.isBase64Encoded ? Buffer.from(event.body ?? '', 'base64').toString('utf8') : (event.body ?? '');
