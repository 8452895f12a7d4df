/**
 * A generation's streamed reply: the relay over the upstream's events (relay.ts), its outcome turned
 * into what the bill is made from (what was delivered, and why it was cut), and the SSE headers,
 * gzipped when the client takes it.
 */
import type { OpenedUpstream } from '../adapters/upstream.js';
import type { Bill, Delivered } from '../billing/bill.js';
import { nanoToUsd } from '../billing/money.js';
import { usageForClient } from '../billing/usage.js';
import { gzipHeaders, SyncGzip } from '../shared/compression.js';
import { type FunctionUrlResult, SSE_CONTENT_TYPE } from '../shared/http.js';
import type { CompletionsConfig } from './config.js';
import { relay } from './relay.js';
import type { RelayOutcome } from './relay-options.js';

export function streamReply(reply: {
  opened: Extract<OpenedUpstream, { stream: true }>;
  envelope: { generationId: string; tier: string; created: number };
  config: Pick<CompletionsConfig, 'keepAliveMs' | 'idleTimeoutMs'>;
  /** Epoch ms by which the relay stops reading and settles. */
  deadline: number;
  outputCap: number;
  gzip: boolean;
  headers: Record<string, string>;
  /** The generation's one bill (generation.ts). */
  bill: (delivered: Delivered) => Promise<Bill>;
}): FunctionUrlResult {
  const { opened, config, bill } = reply;
  const body = relay({
    events: opened.events,
    ...reply.envelope,
    keepAliveMs: config.keepAliveMs,
    idleTimeoutMs: config.idleTimeoutMs,
    deadline: reply.deadline,
    outputCap: reply.outputCap,
    ...(reply.gzip ? { compress: new SyncGzip() } : {}),
    abortUpstream: opened.abort,
    settle: async (outcome) => {
      const { usage, billedNano } = await bill(delivered(outcome));
      return usageForClient(usage, nanoToUsd(billedNano));
    },
  });
  const headers = {
    ...reply.headers,
    'content-type': SSE_CONTENT_TYPE,
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
  };
  return { statusCode: 200, headers: reply.gzip ? gzipHeaders(headers) : headers, body };
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
