/**
 * The floor of a streamed completion: a response-streaming handler that makes one kept-alive HTTP
 * call to the upstream and writes each piece of its SSE body to the client as it arrives. No
 * authentication, parsing, rewriting, compression or billing.
 */
import { bodyOf, relayStream, streamifyResponse, withPrelude } from './runtime.js';

export const handler = streamifyResponse(async (event, responseStream) => {
  await relayStream(bodyOf(event), withPrelude(responseStream, 200, { 'content-type': 'text/event-stream' }));
});
