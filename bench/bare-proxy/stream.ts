/**
 * The floor of a streamed completion: a response-streaming handler that makes one kept-alive HTTP
 * call to the upstream and writes each piece of its SSE body to the client as it arrives. No
 * authentication, parsing, rewriting, compression or billing.
 */
import { Agent, request } from 'node:http';
import { bodyOf, streamifyResponse, withPrelude } from './runtime.js';

const agent = new Agent({ keepAlive: true });

export const handler = streamifyResponse(async (event, responseStream) => {
  const body = bodyOf(event);
  const stream = withPrelude(responseStream, 200, { 'content-type': 'text/event-stream' });
  await new Promise<void>((resolve, reject) => {
    const call = request(`${process.env.UPSTREAM_BASE_URL}/chat/completions`, {
      method: 'POST',
      agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    call.on('response', (response) => {
      response.on('data', (piece: Buffer) => stream.write(piece));
      response.on('end', () => {
        stream.end();
        resolve();
      });
      response.on('error', reject);
    });
    call.on('error', reject);
    call.end(body);
  });
});
