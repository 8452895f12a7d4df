/**
 * DynamoDB calls as they leave this process, counted on Node's HTTP client diagnostics channel: every
 * request carrying DynamoDB's `x-amz-target` header, whether the SDK client sent it or the adapter's
 * direct read (functions/adapters/dynamodb/wire.ts). Each call is reported as `dynamodb:<Operation>`.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';

const CHANNEL = 'http.client.request.start';

export function watchDynamoCalls(onCall: (event: string) => void): () => void {
  const listener = (message: unknown) => {
    const { request } = message as { request: { getHeader: (name: string) => unknown } };
    const target = request.getHeader('x-amz-target');
    if (typeof target === 'string' && target.startsWith('DynamoDB_'))
      onCall(`dynamodb:${target.slice(target.indexOf('.') + 1)}`);
  };
  subscribe(CHANNEL, listener);
  return () => unsubscribe(CHANNEL, listener);
}
