/**
 * The JSON floor with billing's two DynamoDB exchanges: the bare JSON relay (json.ts) inside
 * billing's read and settlement (billing.ts).
 */
import { billed } from './billing.js';
import { bodyOf, streamifyResponse, upstreamJson, withPrelude } from './runtime.js';

export const handler = streamifyResponse((event, responseStream) =>
  billed(event, async () => {
    const reply = await upstreamJson(bodyOf(event));
    const stream = withPrelude(responseStream, 200, { 'content-type': 'application/json' });
    stream.write(reply);
    stream.end();
  }),
);
