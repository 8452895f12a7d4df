/**
 * Relays an upstream SSE stream to the client, rewriting `id` and `model`. Once the upstream is done
 * it resolves `delivered` with what the client was sent; the generation prices that and `finish`
 * ends the stream with exactly one usage chunk carrying the billed cost, then `data: [DONE]`.
 *
 * The relay never depends on the client: Lambda gives no disconnect signal, so the upstream is read
 * to its end and delivered whether or not anyone still listens. Writes to a gone client are dropped.
 *
 * It always delivers inside the function's deadline: at `deadline` (the function's timeout minus
 * the settlement reserve), or once the streamed completion clearly exceeds the output cap, it aborts
 * the upstream, sends a `finish_reason: "length"` chunk and delivers what was streamed. And it is
 * never silent for longer than `keepAliveMs` (CloudFront's origin read timeout applies between
 * packets), until it is finished: an SSE comment goes out whenever nothing else has.
 */
import { BodyTooLargeError } from '../adapters/upstream-body.js';
import { type ClientUsage, stringifyJson } from '../billing/usage.js';
import { CAP_SLACK, laterUsage, outputByteBound, textOf } from '../core/upstream-reply.js';
import { logger } from '../shared/observability.js';
import type { Relay, RelayOptions, RelayOutcome } from './relay-options.js';
import { relayStream } from './relay-stream.js';

/**
 * Besides the byte bound (core/upstream-reply.ts, shared with JSON replies), a stream clearly exceeds
 * its cap past CHUNKS_PER_TOKEN content chunks per allowed token: an upstream sends at most a chunk or
 * so per token.
 */
const CHUNKS_PER_TOKEN = 4;

export function relay(options: RelayOptions): Relay {
  const stream = relayStream(options);
  let relayed: Relayed | undefined;
  const delivered = relayEvents(options, stream.send, stream.write).then(
    (done) => {
      relayed = done;
      return done.outcome;
    },
    (error: unknown) => {
      // relayEvents catches its own faults; this is the last guard against an unhandled rejection,
      // which would end the instance. The stream ends here, unbilled.
      logger.error('relay failed', { generationId: options.generationId, error: errorOf(error) });
      stream.end();
      throw error;
    },
  );
  const finish = (usage: ClientUsage | undefined) => {
    if (stream.ended) return;
    if (!relayed) throw new Error('a relay is finished once it has delivered');
    writeLast(options, relayed, usage, stream.write);
    stream.end();
  };
  return { body: stream.out, delivered, finish };
}

/** What relayEvents found out, and the error chunk's type and code should it end on a failure. */
interface Relayed {
  outcome: RelayOutcome;
  failureKind: { type: string; code: string };
}

function chunkEnvelope(options: Pick<RelayOptions, 'generationId' | 'created' | 'tier'>) {
  return {
    id: options.generationId,
    object: 'chat.completion.chunk' as const,
    created: options.created,
    model: options.tier,
  };
}

/** Relays the upstream's events and stops the upstream: all but the final chunks are written. */
async function relayEvents(
  options: RelayOptions,
  send: (text: string) => void,
  write: (text: string) => void,
): Promise<Relayed> {
  const outcome: RelayOutcome = {
    usage: undefined,
    deliveredText: '',
    failure: undefined,
    cut: undefined,
    finishReason: undefined,
  };
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
  // Stopping the upstream must not stop the bill.
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

  return { outcome, failureKind };
}

/**
 * The final chunks: the usage chunk (on an error chunk if the upstream failed), or, with no usage (the
 * generation could not be priced), a billing error chunk; then [DONE] either way.
 */
function writeLast(
  options: RelayOptions,
  { outcome, failureKind }: Relayed,
  usage: ClientUsage | undefined,
  write: (text: string) => void,
): void {
  if (!usage) {
    write(
      `data: ${JSON.stringify(errorChunk(options, 'The generation could not be billed. Retry later.', { type: 'upstream_error', code: 'billing_failed' }))}\n\n`,
    );
  } else if (outcome.failure) {
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
