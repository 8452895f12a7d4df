import type { Principal } from '../core/access.js';
import { parseChatRequest } from '../core/schemas.js';
import { type FunctionUrlEvent, type FunctionUrlResult, rawBody } from '../shared/http.js';
import { Deadlines } from './deadlines.js';
import { Generation, type GenerationPorts } from './generation.js';

/**
 * One chat completion's story, once its caller is known: validate the body (400), set its deadlines,
 * admit it (a hold, or 402), attempt the upstream (502/504), deliver and price it; the settlement
 * follows the reply (`afterReply`).
 */
export async function complete(
  event: FunctionUrlEvent,
  invocation: {
    caller: Principal;
    requestId: string;
    remainingMs: number;
    afterReply: (work: Promise<void>) => void;
  },
  ports: GenerationPorts,
): Promise<FunctionUrlResult> {
  const startedAt = Date.now();
  const { request, bodyBytes } = takeChatRequest(event);
  const deadlines = new Deadlines(startedAt, invocation.remainingMs, request.stream === true, ports.config);
  const generation = new Generation({ request, bodyBytes, deadlines, ...invocation }, ports);
  await generation.admit();
  return generation.deliver(await generation.attempt());
}

/**
 * The request, parsed and validated, and its size; the event's raw body is dropped. The event lives as
 * long as the invocation, a stream's for the whole generation, and its body (up to 6 MB, twice that in
 * memory when it holds text beyond Latin-1) is not read again. No local of the caller holds it either:
 * an async function keeps its locals across each await.
 */
function takeChatRequest(event: FunctionUrlEvent) {
  const bodyText = rawBody(event);
  delete event.body;
  return { request: parseChatRequest(bodyText), bodyBytes: Buffer.byteLength(bodyText ?? '') };
}
