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
 * It costs 25-45 ms of CPU once the tokenizer is loaded (ten times that in wall time at 160 MB's CPU
 * share), so it runs only when RSS has grown more than an eighth of the memory size past what it was
 * after the last collection (or at the first invocation): an ordinary request adds well under 1 MiB.
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

/** A full collection that also shrinks the young generation and compacts (V8's "last resort" flavour). */
function exposedCollector(): Collect | undefined {
  const gc = (globalThis as { gc?: (options?: object) => unknown }).gc;
  if (typeof gc !== 'function') return undefined;
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
    if (!collect || settled === undefined || rss() - settled <= threshold) return;
    collect();
    settled = rss();
  };
  const atEnd = (request: { event: FunctionUrlEvent; response?: FunctionUrlResult | null | undefined }) => {
    const body = request.response?.body;
    const large =
      largeRequests.has(request.event) || (typeof body === 'string' && body.length >= LARGE_BODY_BYTES);
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
      if ((request.event.body?.length ?? 0) >= LARGE_BODY_BYTES) largeRequests.add(request.event);
      settled ??= rss();
    },
    after: atEnd,
    onError: atEnd,
  };
}
