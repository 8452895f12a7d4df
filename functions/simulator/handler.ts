import { PassThrough } from 'node:stream';
import middy from '@middy/core';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { createSimulator } from './simulator.js';

/**
 * The simulator as a Lambda behind a RESPONSE_STREAM Function URL, for the sandbox stage: CI runs
 * the contract suite against a deployed stack without spending money on a real provider.
 * In Lambda a "dropped connection" can only end the stream early, without `[DONE]`.
 */
const simulator = createSimulator(
  process.env.SIMULATOR_API_KEY ? { apiKey: process.env.SIMULATOR_API_KEY } : {},
);

export const handler = middy<APIGatewayProxyEventV2>({ streamifyResponse: true }).handler(async (event) => {
  const path = event.rawPath.startsWith('/v1/') ? event.rawPath : `/v1${event.rawPath}`;
  const response = await simulator.handle({
    method: event.requestContext.http.method,
    path,
    headers: event.headers,
    body: event.body
      ? event.isBase64Encoded
        ? Buffer.from(event.body, 'base64').toString('utf8')
        : event.body
      : '',
  });
  await sleep(response.headerDelayMs);
  const body = new PassThrough();
  void (async () => {
    for (const piece of response.body) {
      if ('drop' in piece) break;
      await sleep(piece.delayMs ?? 0);
      body.write(piece.text);
    }
    body.end();
  })();
  return { statusCode: response.status, headers: response.headers, body };
});

function sleep(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}
