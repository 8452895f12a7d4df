/**
 * The floor of a JSON completion: a response-streaming handler (as the completions function is) that
 * makes one kept-alive HTTP call to the upstream with the request's body and relays the reply whole.
 * No authentication, validation, parsing or billing.
 */
import { Agent, request } from 'node:http';
import { bodyOf, streamifyResponse, withPrelude } from './runtime.js';

const agent = new Agent({ keepAlive: true });

export const handler = streamifyResponse(async (event, responseStream) => {
  const body = bodyOf(event);
  const reply = await new Promise<Buffer>((resolve, reject) => {
    const call = request(`${process.env.UPSTREAM_BASE_URL}/chat/completions`, {
      method: 'POST',
      agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    call.on('response', (response) => {
      const pieces: Buffer[] = [];
      response.on('data', (piece: Buffer) => pieces.push(piece));
      response.on('end', () => resolve(Buffer.concat(pieces)));
      response.on('error', reject);
    });
    call.on('error', reject);
    call.end(body);
  });
  const stream = withPrelude(responseStream, 200, { 'content-type': 'application/json' });
  stream.write(reply);
  stream.end();
});
