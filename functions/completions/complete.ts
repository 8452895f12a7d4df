import type { Principal } from '../core/access.js';
import { refuseOverContext } from '../core/context-length.js';
import { type ChatRequest, parseChatRequest } from '../core/schemas.js';
import { type FunctionUrlEvent, type FunctionUrlResult, rawBody } from '../shared/http.js';
import { collectLargeRequestGarbage, LARGE_REQUEST_BYTES } from '../shared/memory.js';
import type { GenerationPorts } from './config.js';
import { Deadlines } from './deadlines.js';
import { Generation } from './generation.js';

/**
 * One chat completion's story, once its caller is known: its body validated (400), set its
 * deadlines, refuse a prompt past the tier's context length (400), admit it (a hold, or 402), attempt the upstream (502/504), deliver and price it; the
 * settlement follows the reply (`afterReply`).
 */
export async function complete(
  taken: TakenRequest,
  invocation: {
    caller: Principal;
    requestId: string;
    remainingMs: number;
    afterReply: (work: Promise<void>) => void;
    /** The client takes a gzipped reply (none if unset). */
    gzip?: boolean;
  },
  ports: GenerationPorts,
): Promise<FunctionUrlResult> {
  const startedAt = (ports.clock ?? Date.now)();
  if ('refused' in taken) throw taken.refused;
  const { request, bodyBytes } = taken;
  // The body's other copies (the runtime's event JSON, the event's body) are garbage now that the
  // event's body is dropped (takeChatRequest), and the upstream call is about to copy it twice more.
  if (bodyBytes >= LARGE_REQUEST_BYTES) collectLargeRequestGarbage();
  const deadlines = new Deadlines(startedAt, invocation.remainingMs, request.stream === true, ports.config);
  // Before the hold and the upstream: a prompt past the context length costs the client nothing.
  const { contextLength } = ports.config.tiers[request.model];
  await refuseOverContext(request, bodyBytes, contextLength, deadlines.upstream);
  const generation = new Generation({ request, bodyBytes, deadlines, ...invocation }, ports);
  await generation.admit();
  return generation.deliver(await generation.attempt());
}

/** A request body parsed and validated, with its size; or its refusal (a 400), thrown by `complete`. */
export type TakenRequest = { request: ChatRequest; bodyBytes: number } | { refused: unknown };

/**
 * The request, parsed and validated, and its size; the event's raw body is dropped. The event lives as
 * long as the invocation, a stream's for the whole generation, and its body (up to 6 MB, twice that in
 * memory when it holds text beyond Latin-1) is not read again. No local of the caller holds it either:
 * an async function keeps its locals across each await.
 */
export function takeChatRequest(event: FunctionUrlEvent): TakenRequest {
  const bodyText = rawBody(event);
  delete event.body;
  try {
    return { request: parseChatRequest(bodyText), bodyBytes: Buffer.byteLength(bodyText ?? '') };
  } catch (refused) {
    return { refused };
  }
}

/**
 * A body up to this size is parsed while the caller's key is read; a larger one only once the caller
 * is known, so that a request without a valid key never costs the parse of a multi-megabyte body.
 */
export const PARSE_WHILE_READING_BYTES = 64 * 1024;

/** The request taken now if its body is small (PARSE_WHILE_READING_BYTES), else left for later. */
export function takeSmallChatRequest(event: FunctionUrlEvent): TakenRequest | undefined {
  return (event.body?.length ?? 0) <= PARSE_WHILE_READING_BYTES ? takeChatRequest(event) : undefined;
}
