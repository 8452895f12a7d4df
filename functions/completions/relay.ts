/**
 * Relays an upstream SSE stream to the client, rewriting `id` and `model`, and ends it with exactly
 * one usage chunk carrying the billed cost, then `data: [DONE]`.
 *
 * The relay never depends on the client: Lambda gives no disconnect signal, so the upstream is read
 * to its end and settled whether or not anyone still listens. Writes to a gone client are dropped.
 *
 * It always ends, billed, inside the function's deadline: at `deadline` (the function's timeout minus
 * the settlement reserve), or once the streamed completion clearly exceeds the output cap, it aborts
 * the upstream, sends a `finish_reason: "length"` chunk, settles on what was streamed and ends. And it
 * is never silent for longer than `keepAliveMs` (CloudFront's origin read timeout applies between
 * packets): an SSE comment goes out whenever nothing else has.
 */
import { PassThrough, type Readable } from 'node:stream';
import { createParser } from 'eventsource-parser';
import { readUpstreamUsage, stringifyJson, type UsageReport } from '../core/usage.js';

export interface RelayOutcome {
  /** The upstream's last usage report, if it sent one. */
  usage: UsageReport | undefined;
  /** Everything streamed as content, refusal, reasoning or tool-call text: the basis of an estimate. */
  streamedText: string;
  /** Set when the upstream failed after the first byte. */
  failure: string | undefined;
  /** Set when the relay ended the generation itself: the output cap or the deadline was reached. */
  cut: 'output_cap' | 'deadline' | undefined;
  /** The last finish_reason the upstream gave (of the first choice). */
  finishReason: string | undefined;
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
  /** Epoch ms by which the relay stops reading and settles. */
  deadline?: number;
  /** The request's output cap in tokens: a completion clearly beyond it is cut. */
  outputCap?: number;
  abortUpstream: () => void;
  /**
   * Called once the upstream is done: settles the bill and returns the final chunk's usage object
   * (with `cost`), or throws if the charge could not be recorded (having logged and counted that).
   */
  settle: (outcome: RelayOutcome) => Promise<unknown>;
}

/**
 * When a completion "clearly exceeds" its cap: more than BYTES_PER_TOKEN bytes of text per allowed token
 * (English averages about 4 bytes a token), or more than CHUNKS_PER_TOKEN content chunks per allowed token
 * (an upstream sends at most a chunk or so per token). Allowed = cap + CAP_SLACK.
 */
const BYTES_PER_TOKEN = 6;
const CHUNKS_PER_TOKEN = 4;
const CAP_SLACK = 16;

export function relay(options: RelayOptions): Readable {
  const out = new PassThrough();
  // What is written in one turn of the event loop leaves as one write (one gzip flush, one write to
  // the response stream): an upstream packet often carries several events, and the first chunk
  // follows the opening keep-alive at once. Nothing waits longer than the current turn.
  let pending = '';
  const flush = () => {
    if (pending && !out.destroyed && !out.writableEnded) out.write(pending);
    pending = '';
  };
  const write = (text: string) => {
    if (!pending) setImmediate(flush);
    pending += text;
  };
  void pump(options, write).finally(() => {
    flush();
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
  const outcome: RelayOutcome = {
    usage: undefined,
    streamedText: '',
    failure: undefined,
    cut: undefined,
    finishReason: undefined,
  };
  let done = false;
  let textBytes = 0;
  let choiceChunks = 0;
  const allowed = options.outputCap === undefined ? Infinity : options.outputCap + CAP_SLACK;

  // An SSE comment whenever nothing has been written for keepAliveMs, before and after the first
  // chunk: CloudFront's origin read timeout fires on any silence, not only the first one.
  let lastWrite = Date.now();
  const send = (text: string) => {
    lastWrite = Date.now();
    write(text);
  };
  send(': keep-alive\n\n');
  const keepAlive = setInterval(
    () => {
      if (Date.now() - lastWrite >= options.keepAliveMs) send(': keep-alive\n\n');
    },
    Math.max(1, Math.floor(options.keepAliveMs / 4)),
  );

  const parser = createParser({
    onEvent(event) {
      if (done || outcome.failure || outcome.cut) return;
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
      choiceChunks += 1;
      let text = '';
      for (const choice of choices) text += textOfDelta(choice.delta);
      const finish = choices[0]?.finish_reason;
      if (typeof finish === 'string') outcome.finishReason = finish.slice(0, 32);
      outcome.streamedText += text;
      textBytes += Buffer.byteLength(text);
      if (textBytes > allowed * BYTES_PER_TOKEN || choiceChunks > allowed * CHUNKS_PER_TOKEN) {
        // Not relayed: the client's completion ends at the cap, with a length finish.
        outcome.cut = 'output_cap';
        return;
      }
      const { usage: _dropped, ...rest } = chunk;
      // OpenAI's chunk schema requires finish_reason (null until the end); some upstreams omit it.
      const normalised = choices.map((choice) => ({
        ...choice,
        finish_reason: choice.finish_reason ?? null,
      }));
      send(`data: ${JSON.stringify({ ...rest, ...chunkEnvelope(options), choices: normalised })}\n\n`);
    },
  });

  const reader = options.body.getReader();
  const decoder = new TextDecoder();
  let received = 0;
  try {
    while (!done && !outcome.failure && !outcome.cut) {
      const untilDeadline = (options.deadline ?? Infinity) - Date.now();
      if (untilDeadline <= 0) {
        outcome.cut = 'deadline';
        break;
      }
      const next = await readWithin(reader, Math.min(options.idleTimeoutMs, untilDeadline));
      if (next === 'timeout') {
        // Which limit this wait was for (a timer may fire a millisecond before Date.now() agrees).
        if (untilDeadline <= options.idleTimeoutMs) outcome.cut = 'deadline';
        else outcome.failure = 'The upstream stopped sending.';
        break;
      }
      if (next.done) {
        parser.feed(decoder.decode());
        break;
      }
      received += next.value.byteLength;
      if (received > options.maxBytes) {
        outcome.failure = 'The upstream sent more than the gateway accepts.';
        break;
      }
      parser.feed(decoder.decode(next.value, { stream: true }));
    }
  } catch {
    outcome.failure = 'The upstream connection was lost.';
  } finally {
    if (outcome.failure || outcome.cut) options.abortUpstream();
    if (done || outcome.failure || outcome.cut) reader.cancel().catch(() => {});
  }
  if (outcome.cut) {
    write(
      `data: ${JSON.stringify({ ...chunkEnvelope(options), choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'length' }] })}\n\n`,
    );
  }

  let usage: unknown;
  try {
    usage = await options.settle(outcome);
  } catch {
    clearInterval(keepAlive);
    write(
      `data: ${JSON.stringify(errorChunk(options, 'The generation could not be billed. Retry later.', 'billing_failed'))}\n\n`,
    );
    return;
  }
  // Keep-alives ran through the settlement (a slow database must not let CloudFront cut the client).
  clearInterval(keepAlive);
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

/** The text a delta carries (content, refusal, reasoning, tool calls): what its tokens can be counted from. */
export function textOfDelta(delta: unknown): string {
  if (typeof delta !== 'object' || delta === null) return '';
  const d = delta as {
    content?: unknown;
    refusal?: unknown;
    reasoning?: unknown;
    reasoning_content?: unknown;
    tool_calls?: unknown;
  };
  let text = typeof d.content === 'string' ? d.content : '';
  if (typeof d.refusal === 'string') text += d.refusal;
  if (typeof d.reasoning === 'string') text += d.reasoning;
  if (typeof d.reasoning_content === 'string') text += d.reasoning_content;
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
