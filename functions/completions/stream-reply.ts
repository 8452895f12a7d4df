/**
 * A generation's streamed reply: the relay over the upstream's events (relay.ts), its outcome turned
 * into what the bill is made from (what was delivered, and why it was cut), its end with the bill's
 * usage, and the SSE headers, gzipped when the client takes it.
 */
import type { OpenedUpstream } from '../adapters/upstream.js';
import type { Bill, Delivered } from '../billing/bill.js';
import { nanoToUsd } from '../core/money.js';
import { usageForClient } from '../core/usage.js';
import { gzipHeaders, SyncGzip } from '../shared/compression.js';
import { type FunctionUrlResult, SSE_CONTENT_TYPE } from '../shared/http.js';
import type { CompletionsConfig } from './config.js';
import { relay } from './relay.js';
import type { RelayOutcome } from './relay-options.js';

/** A streamed reply under way: its result for the runtime, what it delivered, and its end. */
export interface StreamReply {
  result: FunctionUrlResult;
  /** What the client was sent, once the upstream is done (rejects only on the relay's own fault). */
  delivered: Promise<Delivered>;
  /** Ends the stream with the bill's usage and cost, or with a billing error if there is no bill. */
  finish(bill: Pick<Bill, 'usage' | 'billedNano'> | undefined): void;
}

export function streamReply(reply: {
  opened: Extract<OpenedUpstream, { stream: true }>;
  envelope: { generationId: string; tier: string; created: number };
  config: Pick<CompletionsConfig, 'keepAliveMs' | 'idleTimeoutMs'>;
  /** Epoch ms by which the relay stops reading and delivers what it has. */
  deadline: number;
  outputCap: number;
  /** The client asked for `stream_options.include_usage` (relay-options.ts). */
  includeUsage: boolean;
  gzip: boolean;
  headers: Record<string, string>;
}): StreamReply {
  const { opened, config } = reply;
  const relayed = relay({
    events: opened.events,
    ...reply.envelope,
    keepAliveMs: config.keepAliveMs,
    idleTimeoutMs: config.idleTimeoutMs,
    deadline: reply.deadline,
    outputCap: reply.outputCap,
    includeUsage: reply.includeUsage,
    ...(reply.gzip ? { compress: new SyncGzip() } : {}),
    abortUpstream: opened.abort,
  });
  const headers = {
    ...reply.headers,
    'content-type': SSE_CONTENT_TYPE,
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
  };
  return {
    result: { statusCode: 200, headers: reply.gzip ? gzipHeaders(headers) : headers, body: relayed.body },
    delivered: relayed.delivered.then(delivered),
    finish: (bill) => relayed.finish(bill && usageForClient(bill.usage, nanoToUsd(bill.billedNano))),
  };
}

/** What the relay delivered, as the bill reads it: the text sent, and why the stream was cut. */
function delivered(outcome: RelayOutcome): Delivered {
  const notes =
    outcome.cut === 'output_cap'
      ? ['stream cut at the output cap']
      : outcome.cut === 'deadline'
        ? ['stream cut at the function deadline']
        : [];
  return {
    report: outcome.usage,
    text: outcome.deliveredText,
    notes,
    finishReason: outcome.failure ? 'error' : outcome.cut ? 'length' : outcome.finishReason,
    cut: outcome.cut !== undefined,
  };
}
