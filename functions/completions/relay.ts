/**
 * Relays an upstream SSE stream to the client, rewriting `id` and `model`, and ends it with exactly
 * one usage chunk carrying the billed cost, then `data: [DONE]`.
 *
 * The relay never depends on the client: Lambda gives no disconnect signal, so the upstream is read
 * to its end and settled whether or not anyone still listens. Writes to a gone client are dropped.
 *
 * It always ends, billed, inside the function's deadline: at `deadline` (the function's timeout minus
 * the settlement reserve), or once the streamed completion clearly exceeds the output cap, it aborts
 * the upstream, sends a `finish_reason: "length"` chunk, bills what was streamed and ends. And it
 * is never silent for longer than `keepAliveMs` (CloudFront's origin read timeout applies between
 * packets): an SSE comment goes out whenever nothing else has.
 */
import { Readable } from 'node:stream';
import { BodyTooLargeError } from '../adapters/upstream-body.js';
import { type ClientUsage, stringifyJson } from '../billing/usage.js';
import { CAP_SLACK, laterUsage, outputByteBound, textOf } from '../core/upstream-reply.js';
import { logger } from '../shared/observability.js';
import type { RelayOptions, RelayOutcome } from './relay-options.js';

/**
 * Besides the byte bound (core/upstream-reply.ts, shared with JSON replies), a stream clearly exceeds
 * its cap past CHUNKS_PER_TOKEN content chunks per allowed token: an upstream sends at most a chunk or
 * so per token.
 */
const CHUNKS_PER_TOKEN = 4;

export function relay(options: RelayOptions): Readable {
  const { compress } = options;
  // Pushed, not written: the relay never waits for its reader (above), so a stream with a writable
  // side (a PassThrough) would only add its write bookkeeping and a tick per write.
  const out = new Readable({
    read() {},
    destroy(error, callback) {
      compress?.close();
      callback(error);
    },
  });
  // What goes out: compressed if asked. A compressor's failure ends the client's stream, not the
  // relay, which still reads the upstream to its end and settles.
  const emit = (data: string | null) => {
    if (out.destroyed) return;
    try {
      if (!compress) out.push(data);
      else if (data !== null) out.push(compress.write(data));
      else {
        out.push(compress.end());
        out.push(null);
      }
    } catch (error) {
      out.destroy(error as Error);
    }
  };
  let ended = false;
  // What is written while one upstream packet is handled leaves as one write (one gzip segment, one
  // write to the response stream): a packet often carries several events, and the first chunk
  // follows the opening keep-alive at once. The write goes out once the promise jobs of that packet
  // have run (process.nextTick runs after them), without waiting for another turn of the event loop.
  let pending = '';
  const flush = () => {
    if (pending && !ended) emit(pending);
    pending = '';
  };
  const write = (text: string) => {
    if (!pending) process.nextTick(flush);
    pending += text;
  };
  void pump(options, write)
    .catch((error) => {
      // pump catches its own faults; this is the last guard against an unhandled rejection, which
      // would end the instance.
      logger.error('relay failed', { generationId: options.generationId, error: errorOf(error) });
    })
    .finally(() => {
      flush();
      ended = true;
      emit(null);
    });
  return out;
}

function chunkEnvelope(options: Pick<RelayOptions, 'generationId' | 'created' | 'tier'>) {
  return {
    id: options.generationId,
    object: 'chat.completion.chunk' as const,
    created: options.created,
    model: options.tier,
  };
}

async function pump(options: RelayOptions, write: (text: string) => void): Promise<void> {
  const outcome: RelayOutcome = {
    usage: undefined,
    deliveredText: '',
    failure: undefined,
    cut: undefined,
    finishReason: undefined,
  };
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
  try {
    await relayEvents(options, outcome, send, write);
  } finally {
    // Keep-alives ran until the usage was known (an estimate of a long reply takes a while); never
    // past the relay's end, whatever ended it.
    clearInterval(keepAlive);
  }
}

/** Relays the upstream's events, stops the upstream, then settles and writes the final chunks. */
async function relayEvents(
  options: RelayOptions,
  outcome: RelayOutcome,
  send: (text: string) => void,
  write: (text: string) => void,
): Promise<void> {
  const envelope = chunkEnvelope(options);
  let done = false;
  let deliveredBytes = 0;
  let choiceChunks = 0;
  // The error chunk's type and code when the relay ends on a failure: the upstream's, or our own.
  let failureKind = { type: 'upstream_error', code: 'upstream_error' };
  const byteBound = options.outputCap === undefined ? Infinity : outputByteBound(options.outputCap);
  const chunkBound =
    options.outputCap === undefined ? Infinity : (options.outputCap + CAP_SLACK) * CHUNKS_PER_TOKEN;
  try {
    while (!done && !outcome.failure && !outcome.cut) {
      const untilDeadline = (options.deadline ?? Infinity) - Date.now();
      if (untilDeadline <= 0) {
        outcome.cut = 'deadline';
        break;
      }
      const next = await options.events.next(Math.min(options.idleTimeoutMs, untilDeadline));
      if (next === 'timeout') {
        // Which limit this wait was for (a timer may fire a millisecond before Date.now() agrees).
        if (untilDeadline <= options.idleTimeoutMs) outcome.cut = 'deadline';
        else outcome.failure = 'The upstream stopped sending.';
        break;
      }
      switch (next.kind) {
        case 'done':
        case 'end':
          done = true;
          break;
        case 'lost':
          outcome.failure =
            next.error instanceof BodyTooLargeError
              ? 'The upstream sent more than the gateway accepts.'
              : 'The upstream connection was lost.';
          break;
        case 'error':
          outcome.failure = 'The upstream reported an error mid-stream.';
          break;
        case 'malformed':
          outcome.failure = 'The upstream sent a malformed chunk.';
          break;
        case 'chunk': {
          if (next.usage) outcome.usage = laterUsage(outcome.usage, next.usage);
          const { choices, system_fingerprint, service_tier } = next.chunk;
          if (choices.length === 0) break; // a usage-only chunk: our own final chunk replaces it
          choiceChunks += 1;
          let text = '';
          for (const choice of choices) text += textOf(choice.delta);
          const bytes = Buffer.byteLength(text);
          if (deliveredBytes + bytes > byteBound || choiceChunks > chunkBound) {
            // Neither relayed nor billed: the client's completion ends at the cap, with a length finish.
            outcome.cut = 'output_cap';
            break;
          }
          const finish = choices[0]?.finish_reason;
          if (finish) outcome.finishReason = finish;
          deliveredBytes += bytes;
          outcome.deliveredText += text;
          const extras = {
            ...(system_fingerprint !== undefined ? { system_fingerprint } : {}),
            ...(service_tier !== undefined ? { service_tier } : {}),
          };
          send(`data: ${JSON.stringify({ ...envelope, ...extras, choices })}\n\n`);
          break;
        }
      }
    }
  } catch (error) {
    // A fault of the gateway's own (a bug, a failed parse that threw): what was delivered is still
    // billed and the stream still ends, with an error chunk and [DONE], instead of an unhandled
    // rejection that would end the instance with the generation unbilled.
    logger.error('relay failed', { generationId: options.generationId, error: errorOf(error) });
    outcome.failure = 'The gateway failed while relaying the stream.';
    failureKind = { type: 'server_error', code: 'internal_error' };
  }
  // Stopping the upstream must not stop the settlement.
  try {
    if (outcome.failure || outcome.cut || !done) options.abortUpstream();
    options.events.cancel();
  } catch (error) {
    logger.warn('upstream not stopped cleanly', {
      generationId: options.generationId,
      error: errorOf(error),
    });
  }
  if (outcome.cut) {
    write(
      `data: ${JSON.stringify({ ...chunkEnvelope(options), choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'length' }] })}\n\n`,
    );
  }

  let usage: ClientUsage;
  try {
    usage = await options.settle(outcome);
  } catch {
    write(
      `data: ${JSON.stringify(errorChunk(options, 'The generation could not be billed. Retry later.', { type: 'upstream_error', code: 'billing_failed' }))}\n\n`,
    );
    write('data: [DONE]\n\n');
    return;
  }
  if (outcome.failure) {
    // Still ended by [DONE]: naive SSE readers wait for it (a stream always ends with it).
    write(`data: ${stringifyJson({ ...errorChunk(options, outcome.failure, failureKind), usage })}\n\n`);
  } else {
    write(`data: ${stringifyJson({ ...chunkEnvelope(options), choices: [], usage })}\n\n`);
  }
  write('data: [DONE]\n\n');
}

/** OpenRouter's practice: an error object in a chunk whose only choice finished with "error". */
function errorChunk(options: RelayOptions, message: string, kind: { type: string; code: string }) {
  return {
    ...chunkEnvelope(options),
    choices: [{ index: 0, delta: {}, finish_reason: 'error' }],
    error: { message, ...kind },
  };
}

function errorOf(error: unknown): Error | string {
  return error instanceof Error ? error : String(error);
}
