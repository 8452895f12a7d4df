/**
 * The floor of a JSON completion: a response-streaming handler (as the completions function is) that
 * makes one kept-alive HTTP call to the upstream with the request's body and relays the reply whole.
 * No authentication, validation, parsing or billing.
 */
import { bodyOf, streamifyResponse, upstreamJson, withPrelude } from './runtime.js';

export const handler = streamifyResponse(async (event, responseStream) => {
  const reply = await upstreamJson(bodyOf(event));
  const stream = withPrelude(responseStream, 200, { 'content-type': 'application/json' });
  stream.write(reply);
  stream.end();
});
