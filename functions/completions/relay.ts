/**
 * Relays an upstream SSE stream to the client, rewriting `id` and `model`. Once the upstream is done
 * it resolves `delivered` with what the client was sent; the generation prices that and `finish`
 * ends the stream with exactly one chunk carrying the billed usage and cost, then `data: [DONE]`.
 *
 * Where that usage goes depends on the client. One that asked for `stream_options.include_usage`
 * gets OpenAI's shape: `"usage": null` on every chunk, then a last chunk of its own with no choices
 * and the usage. Any other client gets the usage on the last chunk that carries a finish_reason, so
 * that every chunk it reads has a choice (`chunk.choices[0].delta` never fails): the relay holds the
 * latest finish chunk back until `finish` (sending it as it was should a newer chunk follow; what it
 * carries besides its finish_reason goes out at once, on a chunk of its own), and writes one of its
 * own if the upstream sent none.
 *
 * The relay never depends on the client: Lambda gives no disconnect signal, so the upstream is read
 * to its end and delivered whether or not anyone still listens. Writes to a gone client are dropped.
 *
 * It always delivers inside the function's deadline: at `deadline` (the function's timeout minus
 * the settlement reserve), or once the streamed completion clearly exceeds the output cap, it aborts
 * the upstream and delivers what was streamed; `finish` then sends a `finish_reason: "length"` chunk
 * (with the usage, for a client that did not ask for include_usage). And it is
 * never silent for longer than `keepAliveMs` (CloudFront's origin read timeout applies between
 * packets), until it is finished: an SSE comment goes out whenever nothing else has.
 */
import { BodyTooLargeError } from '../adapters/upstream-body.js';
import { CAP_SLACK, laterUsage, outputByteBound, textOf } from '../core/upstream-reply.js';
import type { ClientUsage } from '../core/usage.js';
import { logger } from '../shared/observability.js';
import { bare, type Chunk, chunkEnvelope, type Relayed, writeLast } from './relay-last.js';
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
  const delivered = relayEvents(options, stream.send).then(
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

/**
 * Relays the upstream's events and stops the upstream: all but the final chunks are written (the
 * finish chunk held back for the usage is returned, unsent).
 */
async function relayEvents(options: RelayOptions, send: (text: string) => void): Promise<Relayed> {
  const outcome: RelayOutcome = {
    usage: undefined,
    deliveredText: '',
    failure: undefined,
    cut: undefined,
    finishReason: undefined,
  };
  const envelope = chunkEnvelope(options);
  // `"usage": null` on every chunk but the last, as OpenAI sends it to a client that asked for usage.
  const usageField = options.includeUsage ? { usage: null } : {};
  let held: Chunk | undefined;
  let finished = false;
  let calledTool: Relayed['calledTool'];
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
          const relayed: Chunk = { ...envelope, ...extras, choices, ...usageField };
          finished = choices.some((choice) => choice.finish_reason);
          for (const { delta } of choices) {
            if (delta.tool_calls) calledTool = 'tool_calls';
            else if (delta.function_call) calledTool ??= 'function_call';
          }
          // A chunk held back goes out as it came once a newer one follows: events stay in order.
          if (held) send(`data: ${JSON.stringify(held)}\n\n`);
          held = undefined;
          if (!finished || options.includeUsage) send(`data: ${JSON.stringify(relayed)}\n\n`);
          else if (choices.every(bare)) held = relayed;
          else {
            // What the finish chunk carries (its last text, a tool call's end, logprobs) is not held
            // back while the bill is made: it goes out now, and only the finish waits for the usage.
            send(
              `data: ${JSON.stringify({ ...relayed, choices: choices.map((c) => ({ ...c, finish_reason: null })) })}\n\n`,
            );
            held = {
              ...envelope,
              ...extras,
              choices: choices
                .filter((choice) => choice.finish_reason)
                .map(({ index, finish_reason }) => ({ index, delta: {}, logprobs: null, finish_reason })),
            };
          }
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
  // A stream that did not end cleanly ends on a length or error chunk of our own: what was held back
  // goes out now, as it came.
  if (held && (outcome.failure || outcome.cut)) {
    send(`data: ${JSON.stringify(held)}\n\n`);
    held = undefined;
    finished = false;
  }
  return { outcome, failureKind, held, finished, calledTool };
}

function errorOf(error: unknown): Error | string {
  return error instanceof Error ? error : String(error);
}
