import { Readable } from 'node:stream';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import type { FunctionUrlEvent, FunctionUrlResult } from '../../../functions/shared/http.js';
import {
  collectLargeRequestGarbage,
  LARGE_BODY_BYTES,
  lambdaMemoryMb,
  reclaimLargeInvocations,
  reclaimThresholdBytes,
  SAMPLE_EVERY,
} from '../../../functions/shared/memory.js';

/**
 * An invocation that grew the process's memory by more than an eighth of the memory size ends with a
 * collection, after its reply is out; ordinary invocations never pay for one. RSS is read after an
 * invocation with a large body (in or out), and after every SAMPLE_EVERY-th otherwise.
 */
const MiB = 1024 * 1024;

function harness(memoryMb: number | undefined) {
  let rss = 70 * MiB;
  const collections: number[] = [];
  let reply: () => FunctionUrlResult = () => ({ statusCode: 200, headers: {}, body: '{}' });
  let grow = 0;
  let reads = 0;
  let work = () => {};
  const handler = middy<FunctionUrlEvent, FunctionUrlResult>()
    .use(
      reclaimLargeInvocations({
        memoryMb,
        rss: () => {
          reads += 1;
          return rss;
        },
        collect: () => {
          collections.push(rss);
          rss = 72 * MiB;
        },
      }),
    )
    .handler(async () => {
      rss += grow;
      work();
      return reply();
    });
  return {
    collections,
    reads: () => reads,
    /** An invocation that grows RSS by `growBy`; `body` is the size of its request body. */
    invoke: async (growBy: number, replyWith?: () => FunctionUrlResult, body = 0, during = () => {}) => {
      grow = growBy;
      work = during;
      if (replyWith) reply = replyWith;
      return handler({ body: 'x'.repeat(body) } as FunctionUrlEvent, {} as Context);
    },
  };
}

describe('reclaimLargeInvocations', () => {
  it('collects after a large request that grew RSS past an eighth of the memory size, and not after others', async () => {
    const fn = harness(160);
    await fn.invoke(1 * MiB);
    await fn.invoke(1 * MiB, undefined, LARGE_BODY_BYTES);
    expect(fn.collections).toEqual([]);
    await fn.invoke(reclaimThresholdBytes(160), undefined, LARGE_BODY_BYTES);
    expect(fn.collections).toHaveLength(1);
    // Measured from what the process took after that collection, not from its first invocation.
    await fn.invoke(1 * MiB, undefined, LARGE_BODY_BYTES);
    expect(fn.collections).toHaveLength(1);
  });

  it('collects after a large JSON reply that grew RSS, though its request was small', async () => {
    const fn = harness(160);
    await fn.invoke(0);
    const large = () => ({ statusCode: 200, headers: {}, body: 'x'.repeat(LARGE_BODY_BYTES) });
    await fn.invoke(reclaimThresholdBytes(160) + MiB, large);
    expect(fn.collections).toHaveLength(1);
  });

  it('reads RSS after small invocations only one in SAMPLE_EVERY', async () => {
    const fn = harness(160);
    for (let i = 0; i < SAMPLE_EVERY * 4; i++) await fn.invoke(0);
    // The first invocation's reading (what the function takes at rest), then one per sample.
    expect(fn.reads()).toBe(1 + 4);
  });

  it('counts small growths together, so garbage that piles up over many invocations is also given back', async () => {
    const fn = harness(160);
    // 1 MiB each: past 20 MiB at the 21st, found at the next sample (the 24th).
    for (let i = 0; i < 23; i++) await fn.invoke(1 * MiB);
    expect(fn.collections).toEqual([]);
    await fn.invoke(1 * MiB);
    expect(fn.collections).toHaveLength(1);
  });

  it('waits for a streamed reply to finish before collecting', async () => {
    const fn = harness(160);
    await fn.invoke(0);
    const body = new Readable({ read() {} });
    const result = await fn.invoke(
      40 * MiB,
      () => ({ statusCode: 200, headers: {}, body }),
      LARGE_BODY_BYTES,
    );
    expect(result.body).toBe(body);
    expect(fn.collections).toEqual([]);
    body.push('data: [DONE]\n\n');
    body.push(null);
    body.resume();
    await new Promise((resolve) => body.once('close', resolve));
    expect(fn.collections).toHaveLength(1);
  });

  it("ends an invocation that collected a large request's copies on the way with a collection, however little RSS grew", async () => {
    const fn = harness(160);
    await fn.invoke(0);
    await fn.invoke(1 * MiB, undefined, LARGE_BODY_BYTES, collectLargeRequestGarbage);
    expect(fn.collections).toHaveLength(1);
    // Only that invocation: the next one is judged by its RSS again.
    await fn.invoke(1 * MiB, undefined, LARGE_BODY_BYTES);
    expect(fn.collections).toHaveLength(1);
  });

  it('waits for a stream to end before that collection too', async () => {
    const fn = harness(160);
    await fn.invoke(0);
    const body = new Readable({ read() {} });
    await fn.invoke(0, () => ({ statusCode: 200, headers: {}, body }), 0, collectLargeRequestGarbage);
    expect(fn.collections).toEqual([]);
    body.push(null);
    body.resume();
    await new Promise((resolve) => body.once('close', resolve));
    expect(fn.collections).toHaveLength(1);
  });

  it("collects on the way with V8's exposed collector, a full collection, and does nothing without one", () => {
    const global = globalThis as { gc?: (options?: object) => void };
    const calls: unknown[] = [];
    global.gc = (options) => void calls.push(options);
    try {
      collectLargeRequestGarbage();
      expect(calls).toEqual([{ type: 'major', execution: 'sync' }]);
    } finally {
      delete global.gc;
    }
    expect(() => collectLargeRequestGarbage()).not.toThrow();
  });

  it('does nothing without a memory size (outside Lambda)', async () => {
    const fn = harness(undefined);
    await fn.invoke(0);
    await fn.invoke(500 * MiB);
    expect(fn.collections).toEqual([]);
  });

  it("reads the memory size from Lambda's environment", () => {
    expect(lambdaMemoryMb({ AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '160' })).toBe(160);
    expect(lambdaMemoryMb({})).toBeUndefined();
    expect(lambdaMemoryMb({ AWS_LAMBDA_FUNCTION_MEMORY_SIZE: 'x' })).toBeUndefined();
  });
});
