/**
 * The floor of a streamed completion: a response-streaming handler that makes one kept-alive HTTP
 * call to the upstream and writes each piece of its SSE body to the client as it arrives. No
 * authentication, parsing, rewriting, compression or billing.
 */
import { bodyOf, callUpstream, streamifyResponse, withPrelude } from './runtime.js';

export const handler = streamifyResponse(async (event, responseStream) => {
  const body = bodyOf(event);
  const stream = withPrelude(responseStream, 200, { 'content-type': 'text/event-stream' });
  await new Promise<void>((resolve, reject) =>
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
});
