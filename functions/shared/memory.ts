/**
 * Memory given back after an invocation that took a lot of it, so that the next one starts from the
 * function's usual footprint rather than on top of this one's garbage.
 *
 * V8 collects its old generation lazily and keeps a grown young generation committed: after a 5.5 MiB
 * request (twice that as a string beyond Latin-1) whose usage was estimated, an instance at 160 MB's
 * heap limits still held the request's copies and the tokenizer's build garbage when the next such
 * request arrived, and the runtime's parse of that event took it to 161 MiB of RSS: past the memory
 * size, where Lambda kills the instance and the request goes unanswered and unbilled. A full,
 * memory-reducing collection at the end of the first brought the same pair's peak to 134-136 MiB
 * (four such requests in test/integration/memory-fit.test.ts: 154 MiB without it, 140-144 with it).
 *
 * That still left the four requests of the test at 134-154 MiB from run to run (fifteen runs), because the
 * collection at the end found the request itself still reachable (from the handler's context and from
 * the settlement still writing: a heap snapshot there held its 8.7 MiB string), and because within a
 * request V8 started its own full collections late as often as not (collectLargeRequestGarbage). With
 * the request let go before the end (handler.ts, generation.ts) and a large request's copies collected
 * as each step is done with them, the same test peaks at 118-122 MiB (ten runs).
 *
 * It costs 25-45 ms of CPU once the tokenizer is loaded (ten times that in wall time at 160 MB's CPU
 * share), so it runs only when RSS has grown more than an eighth of the memory size past what it was
 * after the last collection (or at the first invocation), or after a large request
 * (LARGE_REQUEST_BYTES), whose copies are garbage by then: an ordinary request adds well under 1 MiB.
 * RSS itself is read (a read of /proc, 1.5% of a small JSON request's CPU) after an invocation that
 * carried a large body, in or out (LARGE_BODY_BYTES), and after every SAMPLE_EVERY-th one otherwise:
 * garbage that piles up over small invocations is found within a few of them.
 * It runs once a stream has ended, or as a JSON reply is returned to the runtime (that reply waits for
 * it), within the invocation, since Lambda freezes the process between invocations.
 *
 * `gc` exists because Lambda's Node.js runtime starts node with --expose-gc (as the local aws-lambda-ric
 * launcher does); without it this does nothing.
 */
import type { Readable } from 'node:stream';
import type { MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import type { FunctionUrlEvent, FunctionUrlResult } from './http.js';

type Collect = () => void;

/** V8's collector, exposed by --expose-gc (below); undefined without it. */
function exposedGc(): ((options?: object) => unknown) | undefined {
  const gc = (globalThis as { gc?: unknown }).gc;
  return typeof gc === 'function' ? (gc as (options?: object) => unknown) : undefined;
}

/** A full collection that also shrinks the young generation and compacts (V8's "last resort" flavour). */
function exposedCollector(): Collect | undefined {
  const gc = exposedGc();
  if (!gc) return undefined;
  return () => void gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

export interface ReclaimOptions {
  /** The function's memory size in MiB (lambdaMemoryMb()); without one, nothing is collected. */
  memoryMb: number | undefined;
  /** For tests: the collector and the RSS reading. */
  collect?: Collect;
  rss?: () => number;
}

/** The memory size Lambda gives this instance, from its environment; undefined outside Lambda. */
export function lambdaMemoryMb(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const value = Number(env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE);
  return Number.isInteger(value) && value > 0 ? value : undefined;
}

/** A request or JSON reply body at least this long has RSS read after it. */
export const LARGE_BODY_BYTES = 256 * 1024;
/** Otherwise RSS is read after one invocation in this many. */
export const SAMPLE_EVERY = 8;

/**
 * A request body of at least this many bytes has its copies collected on the way as well
 * (collectLargeRequestGarbage), and its invocation always ends with a collection. Below it the
 * collections on the way are not worth their CPU: four requests of 1.95 MiB, estimated, peaked at
 * 117 MiB in the memory-fit test without them.
 */
export const LARGE_REQUEST_BYTES = 2 * 1024 * 1024;

/** Set by a collection on the way; the invocation then ends with one whatever its RSS says. */
let collectedOnTheWay = false;

/**
 * A full collection in the middle of an invocation whose request body is large (LARGE_REQUEST_BYTES),
 * called where that body's copies have just become garbage and before the next step allocates: once
 * the body is parsed (complete.ts: the runtime's event JSON and the event's body), and before an
 * estimate counts its prompt (billing/bill.ts: the upstream request's JSON and what writing it copied).
 * V8 frees a large string only in a full collection, which it starts by its own heuristics; in the
 * memory-fit test (8.7 MiB a copy) it often started one only after the next step had made its copies:
 * at the upstream call the heap held five (the two above, dead, the parsed request, and the upstream
 * request's two: 67.8 MiB in use, 137-138 MiB of RSS), and a count that began on such garbage, which
 * grows the young generation to its limit, went to 148.8 MiB.
 *
 * Not the last-resort flavour of the end of an invocation: the young generation is about to be used
 * again. 9-45 ms each here (the tokenizer's tables are most of what is marked), against the seconds an
 * estimate of such a body takes. Nothing happens without `gc` (outside Lambda).
 */
export function collectLargeRequestGarbage(): void {
  collectedOnTheWay = true;
  exposedGc()?.({ type: 'major', execution: 'sync' });
}

/** The growth in RSS, in bytes, past which an invocation ends with a collection: an eighth of memory. */
export function reclaimThresholdBytes(memoryMb: number): number {
  return (memoryMb * 1024 * 1024) / 8;
}

export function reclaimLargeInvocations(
  options: ReclaimOptions,
): MiddlewareObj<FunctionUrlEvent, FunctionUrlResult, Error, Context> {
  const collect = options.memoryMb === undefined ? undefined : (options.collect ?? exposedCollector());
  const rss = options.rss ?? (() => process.memoryUsage.rss());
  const threshold = reclaimThresholdBytes(options.memoryMb ?? 0);
  // RSS after the last collection (or at the first invocation): what the function takes at rest.
  let settled: number | undefined;
  let invocations = 0;
  // Requests that carried a large body (the handler may drop the event's body before the end).
  const largeRequests = new WeakSet<FunctionUrlEvent>();
  const reclaimIfGrown = () => {
    // A large request's copies are garbage by now, however much RSS grew (collectLargeRequestGarbage).
    const large = collectedOnTheWay;
    collectedOnTheWay = false;
    if (!collect || settled === undefined || (!large && rss() - settled <= threshold)) return;
    collect();
    settled = rss();
  };
  const atEnd = (request: { event: FunctionUrlEvent; response?: FunctionUrlResult | null | undefined }) => {
    const body = request.response?.body;
    const large =
      collectedOnTheWay ||
      largeRequests.has(request.event) ||
      (typeof body === 'string' && body.length >= LARGE_BODY_BYTES);
    if (!large && invocations % SAMPLE_EVERY !== 0) return;
    if (body && typeof body !== 'string') {
      // A stream: the invocation lasts until it is done.
      (body as Readable).once('close', reclaimIfGrown);
      return;
    }
    reclaimIfGrown();
  };
  return {
    before: (request) => {
      invocations += 1;
      collectedOnTheWay = false;
      if ((request.event.body?.length ?? 0) >= LARGE_BODY_BYTES) largeRequests.add(request.event);
      settled ??= rss();
    },
    after: atEnd,
    onError: atEnd,
  };
}
