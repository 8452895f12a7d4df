/** What aws-lambda-ric gives a response-streaming handler (the `awslambda` global), as the bare proxies use it. */
import { Agent, type IncomingMessage, request } from 'node:http';
import type { Writable } from 'node:stream';

export interface FunctionUrlEvent {
  body?: string;
  isBase64Encoded?: boolean;
  headers?: Record<string, string | undefined>;
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

const agent = new Agent({ keepAlive: true });

/** One kept-alive POST of `body` to the upstream's chat completions; `onResponse` reads the reply. */
function callUpstream(
  body: string,
  onResponse: (response: IncomingMessage) => void,
  onError: (error: Error) => void,
): void {
  const call = request(`${process.env.UPSTREAM_BASE_URL}/chat/completions`, {
    method: 'POST',
    agent,
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
  });
  call.on('response', onResponse);
  call.on('error', onError);
  call.end(body);
}

/** The upstream's reply to `body`, read whole. */
export function upstreamJson(body: string): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) =>
    callUpstream(
      body,
      (response) => {
        const pieces: Buffer[] = [];
        response.on('data', (piece: Buffer) => pieces.push(piece));
        response.on('end', () => resolve(Buffer.concat(pieces)));
        response.on('error', reject);
      },
      reject,
    ),
  );
}

/** The upstream's SSE reply to `body`, each piece written to `stream` as it arrives, then its end. */
export function relayStream(body: string, stream: Writable): Promise<void> {
  return new Promise<void>((resolve, reject) =>
    callUpstream(
      body,
      (response) => {
        response.on('data', (piece: Buffer) => stream.write(piece));
        response.on('end', () => {
          stream.end();
          resolve();
        });
        response.on('error', reject);
      },
      reject,
    ),
  );
}
