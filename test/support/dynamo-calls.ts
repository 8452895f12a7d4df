/**
 * DynamoDB calls as they leave this process: those of the SDK client, on Node's HTTP client
 * diagnostics channel (a request carrying DynamoDB's `x-amz-target` header), and the adapter's direct
 * calls (functions/adapters/dynamodb/wire.ts), on its own HTTP/1.1 exchange's channel (http1.ts).
 * Each call is reported as `dynamodb:<Operation>`.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { HTTP1_START, type Http1Exchange } from '../../functions/adapters/http1.js';

const NODE_HTTP_START = 'http.client.request.start';

/** The `host` a direct call's head names (an upstream call's is the upstream's host and port). */
export function hostOf(exchange: Http1Exchange): string | undefined {
  return /\r\nhost: ([^\r]*)\r\n/i.exec(exchange.head)?.[1];
}

/** The operation a direct call's head names. */
export function operationOf(exchange: Http1Exchange): string | undefined {
  return /\r\nx-amz-target: DynamoDB_\d+\.(\w+)\r\n/i.exec(exchange.head)?.[1];
}

export function watchDynamoCalls(onCall: (event: string) => void): () => void {
  const viaSdk = (message: unknown) => {
    const { request } = message as { request: { getHeader: (name: string) => unknown } };
    const target = request.getHeader('x-amz-target');
    if (typeof target === 'string' && target.startsWith('DynamoDB_'))
      onCall(`dynamodb:${target.slice(target.indexOf('.') + 1)}`);
  };
  const direct = (message: unknown) => {
    const operation = operationOf(message as Http1Exchange);
    if (operation) onCall(`dynamodb:${operation}`);
  };
  subscribe(NODE_HTTP_START, viaSdk);
  subscribe(HTTP1_START, direct);
  return () => {
    unsubscribe(NODE_HTTP_START, viaSdk);
    unsubscribe(HTTP1_START, direct);
  };
}
