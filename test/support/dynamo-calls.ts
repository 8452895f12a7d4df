/**
 * Outbound calls as they leave this process: the SDK client's, on Node's HTTP client diagnostics
 * channel (a request carrying DynamoDB's `x-amz-target` header), and the request path's own (the
 * direct DynamoDB calls of functions/adapters/dynamodb/wire.ts and the upstream call), on undici's
 * diagnostics channels (https://undici.nodejs.org/#/docs/api/DiagnosticsChannel). Each DynamoDB call
 * is reported as `dynamodb:<Operation>`.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { FORWARDED_HEADER } from '../../lib/local/iam.js';

const NODE_HTTP_START = 'http.client.request.start';
const UNDICI_CREATE = 'undici:request:create';
const UNDICI_BODY_SENT = 'undici:request:bodySent';
const UNDICI_COMPLETE = 'undici:request:trailers';

/** An undici request as its diagnostics channels publish it. */
interface UndiciRequest {
  origin: string | URL;
  path: string;
  /** Names and values in turn. */
  headers: string[] | string;
}

/** One call through undici, kept up to date: its request sent whole, its answer complete. */
export interface OutboundCall {
  /** The origin's host and port. */
  host: string;
  /** The DynamoDB operation its `x-amz-target` names, if any. */
  operation: string | undefined;
  written: boolean;
  answered: boolean;
}

function headerOf(request: UndiciRequest, name: string): string | undefined {
  const { headers } = request;
  if (typeof headers === 'string')
    return new RegExp(`(?:^|\\r\\n)${name}: ([^\\r]*)\\r\\n`, 'i').exec(headers)?.[1];
  for (let i = 0; i + 1 < headers.length; i += 2)
    if (headers[i]?.toLowerCase() === name) return headers[i + 1];
  return undefined;
}

/** Calls `onCall` with each call undici starts (the object is updated as the call goes on). */
export function watchOutbound(onCall: (call: OutboundCall) => void): () => void {
  const calls = new WeakMap<object, OutboundCall>();
  const created = (message: unknown) => {
    const { request } = message as { request: UndiciRequest };
    const call: OutboundCall = {
      host: new URL(String(request.origin)).host,
      operation: /^DynamoDB_\d+\.(\w+)$/.exec(headerOf(request, 'x-amz-target') ?? '')?.[1],
      written: false,
      answered: false,
    };
    calls.set(request, call);
    onCall(call);
  };
  const sent = (message: unknown) => {
    const call = calls.get((message as { request: object }).request);
    if (call) call.written = true;
  };
  const complete = (message: unknown) => {
    const call = calls.get((message as { request: object }).request);
    if (call) call.answered = true;
  };
  subscribe(UNDICI_CREATE, created);
  subscribe(UNDICI_BODY_SENT, sent);
  subscribe(UNDICI_COMPLETE, complete);
  return () => {
    unsubscribe(UNDICI_CREATE, created);
    unsubscribe(UNDICI_BODY_SENT, sent);
    unsubscribe(UNDICI_COMPLETE, complete);
  };
}

export function watchDynamoCalls(onCall: (event: string) => void): () => void {
  const viaSdk = (message: unknown) => {
    const { request } = message as { request: { getHeader: (name: string) => unknown } };
    const target = request.getHeader('x-amz-target');
    // The local IAM layer's forwarding of a call already counted as it left its caller.
    if (request.getHeader(FORWARDED_HEADER) !== undefined) return;
    if (typeof target === 'string' && target.startsWith('DynamoDB_'))
      onCall(`dynamodb:${target.slice(target.indexOf('.') + 1)}`);
  };
  subscribe(NODE_HTTP_START, viaSdk);
  const stopDirect = watchOutbound((call) => {
    if (call.operation) onCall(`dynamodb:${call.operation}`);
  });
  return () => {
    unsubscribe(NODE_HTTP_START, viaSdk);
    stopDirect();
  };
}
