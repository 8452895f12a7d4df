import { PassThrough, type Readable } from 'node:stream';
import { createParser } from 'eventsource-parser';
import type { TokenUsage } from '../core/pricing.js';
import { readUpstreamUsage, stringifyJson } from '../core/usage.js';

/**
 * Relays an upstream SSE stream to the client, rewriting `id` and `model`, and ends it with exactly
 * one usage chunk carrying the billed cost, then `data: [DONE]`.
 *
 * The relay never depends on the client: Lambda gives no disconnect signal, so the upstream is read
 * to its end and settled whether or not anyone still listens. Writes to a gone client are dropped.
 */

export interface RelayOutcome {
  /** The upstream's usage if it sent one. */
  usage: TokenUsage | undefined;
  /** Everything streamed as content, refusal or tool-call text: the basis of an estimate. */
  streamedText: string;
  /** Set when the upstream failed after the first byte. */
  failure: string | undefined;
}

export interface RelayOptions {
  body: ReadableStream<Uint8Array>;
  generationId: string;
  tier: string;
  created: number;
  keepAliveMs: number;
  idleTimeoutMs: number;
  /** An upstream stream larger than this is cut off as a failure (untrusted input, OWASP API10). */
  maxBytes: number;
  abortUpstream: () => void;
  /**
   * Called once the upstream is done: settles the bill and returns the final chunk's usage object
   * (with `cost`), or throws if the charge could not be recorded (having logged and counted that).
   */
  settle: (outcome: RelayOutcome) => Promise<unknown>;
}

export function relay(options: RelayOptions): Readable {
  const out = new PassThrough();
  const write = (text: string) => {
    if (!out.destroyed && !out.writableEnded) out.write(text);
  };
  void pump(options, write).finally(() => {
    if (!out.destroyed && !out.writableEnded) out.end();
  });
  return out;
}

function chunkEnvelope(options: RelayOptions) {
  return {
    id: options.generationId,
    object: 'chat.completion.chunk',
    created: options.created,
    model: options.tier,
  };
}

async function pump(options: RelayOptions, write: (text: string) => void): Promise<void> {
  const outcome: RelayOutcome = { usage: undefined, streamedText: '', failure: undefined };
  let firstChunkSeen = false;
  let done = false;

  // SSE comments keep CloudFront's origin timeout from firing while the upstream thinks.
  write(': keep-alive\n\n');
  const keepAlive = setInterval(() => {
    if (!firstChunkSeen) write(': keep-alive\n\n');
  }, options.keepAliveMs);

  const parser = createParser({
    onEvent(event) {
      if (done || outcome.failure) return;
      if (event.data === '[DONE]') {
        done = true;
        return;
      }
      let chunk: Record<string, unknown>;
      try {
        chunk = JSON.parse(event.data) as Record<string, unknown>;
      } catch {
        outcome.failure = 'The upstream sent a malformed chunk.';
        return;
      }
      if (typeof chunk !== 'object' || chunk === null) {
        outcome.failure = 'The upstream sent a malformed chunk.';
        return;
      }
      if (chunk.error !== undefined) {
        outcome.failure = 'The upstream reported an error mid-stream.';
        return;
      }
      const usage = readUpstreamUsage(chunk.usage, event.data);
      if (usage) outcome.usage = usage;
      const choices = Array.isArray(chunk.choices) ? (chunk.choices as Record<string, unknown>[]) : [];
      if (choices.length === 0) return; // a usage-only chunk: our own final chunk replaces it
      firstChunkSeen = true;
      for (const choice of choices) outcome.streamedText += textOfDelta(choice.delta);
      const { usage: _dropped, ...rest } = chunk;
      // OpenAI's chunk schema requires finish_reason (null until the end); some upstreams omit it.
      const normalised = choices.map((choice) => ({
        ...choice,
        finish_reason: choice.finish_reason ?? null,
      }));
      write(`data: ${JSON.stringify({ ...rest, ...chunkEnvelope(options), choices: normalised })}\n\n`);
    },
  });

  const reader = options.body.getReader();
  const decoder = new TextDecoder();
  let received = 0;
  try {
    while (!done && !outcome.failure) {
      const next = await readWithin(reader, options.idleTimeoutMs);
      if (next === 'timeout') {
        outcome.failure = 'The upstream stopped sending.';
        options.abortUpstream();
        break;
      }
      if (next.done) {
        parser.feed(decoder.decode());
        break;
      }
      received += next.value.byteLength;
      if (received > options.maxBytes) {
        outcome.failure = 'The upstream sent more than the gateway accepts.';
        options.abortUpstream();
        break;
      }
      parser.feed(decoder.decode(next.value, { stream: true }));
    }
  } catch {
    outcome.failure = 'The upstream connection was lost.';
  } finally {
    clearInterval(keepAlive);
    if (done || outcome.failure) reader.cancel().catch(() => {});
  }

  let usage: unknown;
  try {
    usage = await options.settle(outcome);
  } catch {
    write(
      `data: ${JSON.stringify(errorChunk(options, 'The generation could not be billed. Retry later.', 'billing_failed'))}\n\n`,
    );
    return;
  }
  if (outcome.failure) {
    write(`data: ${stringifyJson({ ...errorChunk(options, outcome.failure, 'upstream_error'), usage })}\n\n`);
    return;
  }
  write(`data: ${stringifyJson({ ...chunkEnvelope(options), choices: [], usage })}\n\n`);
  write('data: [DONE]\n\n');
}

/** OpenRouter's practice: an error object in a chunk whose only choice finished with "error". */
function errorChunk(options: RelayOptions, message: string, code: string) {
  return {
    ...chunkEnvelope(options),
    choices: [{ index: 0, delta: {}, finish_reason: 'error' }],
    error: { message, type: 'upstream_error', code },
  };
}

function textOfDelta(delta: unknown): string {
  if (typeof delta !== 'object' || delta === null) return '';
  const d = delta as { content?: unknown; refusal?: unknown; tool_calls?: unknown };
  let text = typeof d.content === 'string' ? d.content : '';
  if (typeof d.refusal === 'string') text += d.refusal;
  if (Array.isArray(d.tool_calls)) {
    for (const call of d.tool_calls as { function?: { name?: unknown; arguments?: unknown } }[]) {
      if (typeof call.function?.name === 'string') text += call.function.name;
      if (typeof call.function?.arguments === 'string') text += call.function.arguments;
    }
  }
  return text;
}

async function readWithin<T>(
  reader: ReadableStreamDefaultReader<T>,
  ms: number,
): Promise<Awaited<ReturnType<ReadableStreamDefaultReader<T>['read']>> | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  try {
    return await Promise.race([reader.read(), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
