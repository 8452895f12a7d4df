/**
 * Outbound calls as they leave this process, on Node's HTTP client diagnostics channels: the SDK
 * client's and the request path's own (the direct DynamoDB calls of functions/adapters/dynamodb/wire.ts
 * and the upstream call, functions/adapters/origin.ts), all on Node's HTTP client. Each DynamoDB call
 * (a request carrying DynamoDB's `x-amz-target` header) is reported as `dynamodb:<Operation>`; the
 * local IAM layer's forwarding of a call already counted as it left its caller is not.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { ClientRequest, IncomingMessage } from 'node:http';
import { FORWARDED_HEADER } from '../../lib/local/iam.js';

const NODE_HTTP_START = 'http.client.request.start';
const NODE_HTTP_RESPONSE = 'http.client.response.finish';

/** One call, kept up to date: its request sent whole, its answer complete. */
export interface OutboundCall {
  /** The origin's host and port. */
  host: string;
  /** The DynamoDB operation its `x-amz-target` names, if any. */
  operation: string | undefined;
  written: boolean;
  answered: boolean;
}

/** Calls `onCall` with each call this process starts (the object is updated as the call goes on). */
export function watchOutbound(onCall: (call: OutboundCall) => void): () => void {
  const calls = new WeakMap<object, OutboundCall>();
  const started = (message: unknown) => {
    const { request } = message as { request: ClientRequest };
    if (request.getHeader(FORWARDED_HEADER) !== undefined) return;
    const target = request.getHeader('x-amz-target');
    const call: OutboundCall = {
      host: String(request.getHeader('host') ?? request.host),
      operation: /^DynamoDB_\d+\.(\w+)$/.exec(typeof target === 'string' ? target : '')?.[1],
      written: false,
      answered: false,
    };
    calls.set(request, call);
    request.once('finish', () => {
      call.written = true;
    });
    onCall(call);
  };
  const responded = (message: unknown) => {
    const { request, response } = message as { request: ClientRequest; response: IncomingMessage };
    const call = calls.get(request);
    if (call)
      response.once('end', () => {
        call.answered = true;
      });
  };
  subscribe(NODE_HTTP_START, started);
  subscribe(NODE_HTTP_RESPONSE, responded);
  return () => {
    unsubscribe(NODE_HTTP_START, started);
    unsubscribe(NODE_HTTP_RESPONSE, responded);
  };
}

export function watchDynamoCalls(onCall: (event: string) => void): () => void {
  return watchOutbound((call) => {
    if (call.operation) onCall(`dynamodb:${call.operation}`);
  });
}
