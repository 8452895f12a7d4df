/**
 * A relayed stream's final chunks (relay.ts): where the usage goes for each kind of client, the finish
 * chunk of our own when the stream needs one, the error chunk, then [DONE].
 */
import { type ClientUsage, stringifyJson } from '../core/usage.js';
import type { RelayOptions, RelayOutcome } from './relay-options.js';

/** What relayEvents found out, and what the final chunks are made from. */
export interface Relayed {
  outcome: RelayOutcome;
  /** The error chunk's type and code should the relay end on a failure. */
  failureKind: { type: string; code: string };
  /**
   * The upstream's latest finish chunk, not yet sent (only for a client that did not ask for
   * include_usage, and only on a clean end): `finish` sends it with the usage.
   */
  held: Chunk | undefined;
  /** The last choice chunk relayed (or held) carried a finish_reason: no finish chunk of our own. */
  finished: boolean;
  /** The finish_reason a tool call (or a legacy function call) relayed calls for, if one was. */
  calledTool: 'tool_calls' | 'function_call' | undefined;
}

export type Chunk = ReturnType<typeof chunkEnvelope> & { choices: unknown[] };

export function chunkEnvelope(options: Pick<RelayOptions, 'generationId' | 'created' | 'tier'>) {
  return {
    id: options.generationId,
    object: 'chat.completion.chunk' as const,
    created: options.created,
    model: options.tier,
  };
}

/**
 * The final chunks, then [DONE] whatever happened:
 * - the upstream failed: an error chunk with the usage;
 * - it did not, to a client that asked for include_usage: the finish chunk, if the stream needs one
 *   of ours (a `length` one if it was cut, or the upstream sent none), with `"usage": null`, then a
 *   chunk with no choices and the usage;
 * - to any other client: the usage on the finish chunk, the upstream's (held back) or ours;
 * - with no usage (the generation could not be priced), the chunk held back or the length chunk as
 *   they are, then a billing error chunk.
 */
export function writeLast(
  options: RelayOptions,
  relayed: Relayed,
  usage: ClientUsage | undefined,
  write: (text: string) => void,
): void {
  const { outcome, failureKind } = relayed;
  const last = outcome.failure ? undefined : lastFinishChunk(options, relayed);
  if (!usage) {
    // Only what the upstream sent or the cut says: no finish of our own before the billing error.
    if (last && (relayed.held || outcome.cut)) write(`data: ${JSON.stringify(last)}\n\n`);
    write(
      `data: ${JSON.stringify(errorChunk(options, 'The generation could not be billed. Retry later.', { type: 'upstream_error', code: 'billing_failed' }))}\n\n`,
    );
  } else if (outcome.failure) {
    // Still ended by [DONE]: naive SSE readers wait for it (a stream always ends with it).
    write(`data: ${stringifyJson({ ...errorChunk(options, outcome.failure, failureKind), usage })}\n\n`);
  } else if (options.includeUsage) {
    if (last) write(`data: ${JSON.stringify(last)}\n\n`);
    write(`data: ${stringifyJson({ ...chunkEnvelope(options), choices: [], usage })}\n\n`);
  } else {
    // lastFinishChunk always gives one here (no include_usage, no failure): the usage rides on it.
    write(`data: ${stringifyJson({ ...last, usage })}\n\n`);
  }
  write('data: [DONE]\n\n');
}

/**
 * The finish chunk still to be sent on an end without failure: the one held back; a `length` one of
 * ours on a cut; or, when the last chunk relayed carried no finish_reason, ours with the upstream's
 * last finish_reason, else `tool_calls` after a tool call (`function_call` after a legacy one) and
 * `stop` otherwise (a JSON reply without a finish_reason reads `stop` too). None when the upstream's
 * finish chunk was the last one sent (a client that asked for include_usage gets it at once).
 */
function lastFinishChunk(options: RelayOptions, relayed: Relayed): Chunk | undefined {
  const { outcome } = relayed;
  const usageField = options.includeUsage ? { usage: null } : {};
  if (relayed.held) return relayed.held;
  let reason: string;
  if (outcome.cut) reason = 'length';
  else if (relayed.finished && options.includeUsage) return undefined;
  else reason = outcome.finishReason ?? relayed.calledTool ?? 'stop';
  return {
    ...chunkEnvelope(options),
    choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: reason }],
    ...usageField,
  };
}

/** A choice that carries nothing but its finish: a delta with no value in it, and no logprobs. */
export function bare(choice: { delta: object; logprobs?: unknown }): boolean {
  return choice.logprobs == null && Object.values(choice.delta).every((v) => v == null || v === '');
}

/** OpenRouter's practice: an error object in a chunk whose only choice finished with "error". */
function errorChunk(options: RelayOptions, message: string, kind: { type: string; code: string }) {
  return {
    ...chunkEnvelope(options),
    choices: [{ index: 0, delta: {}, finish_reason: 'error' }],
    error: { message, ...kind },
  };
}
