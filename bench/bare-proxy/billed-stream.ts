/**
 * The streaming floor with billing's two DynamoDB exchanges: the bare SSE relay (stream.ts) inside
 * billing's read and settlement (billing.ts), the settlement after the stream's end as the service's.
 */
import { billed } from './billing.js';
import { bodyOf, relayStream, streamifyResponse, withPrelude } from './runtime.js';

export const handler = streamifyResponse((event, responseStream) =>
  billed(event, () =>
    relayStream(bodyOf(event), withPrelude(responseStream, 200, { 'content-type': 'text/event-stream' })),
  ),
);
