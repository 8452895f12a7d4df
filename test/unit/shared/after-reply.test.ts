import { PassThrough, Readable, Writable } from 'node:stream';
import type { Context } from 'aws-lambda';
import { beforeAll, describe, expect, it } from 'vitest';
import { type AfterReplyContext, streamingHandler } from '../../../functions/shared/after-reply.js';
import type { FunctionUrlEvent, FunctionUrlResult } from '../../../functions/shared/http.js';

/**
 * The response-streaming wrapper against a stand-in for aws-lambda-ric's globals: the reply goes out
 * (status and headers as the prelude, then the body, then the end), and the invocation ends only once
 * the work queued after the reply has settled, whatever became of the reply.
 */
interface Sink extends Writable {
  prelude?: unknown;
  received: string;
}

beforeAll(() => {
  (globalThis as { awslambda?: unknown }).awslambda = {
    streamifyResponse: (handler: unknown) => handler,
    HttpResponseStream: {
      from: (stream: Sink, prelude: unknown) => {
        stream.prelude = prelude;
        return stream;
      },
    },
  };
});

function sink(): Sink {
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      stream.received += chunk.toString();
      done();
    },
  }) as Sink;
  stream.received = '';
  return stream;
}

type Invoke = (event: FunctionUrlEvent, stream: Writable, context: Context) => Promise<void>;

/** A promise and its resolver: work that settles when the test says so. */
function later() {
  let settle = () => {};
  const promise = new Promise<void>((resolve) => {
    settle = resolve;
  });
  return { promise, settle };
}

async function notYet(promise: Promise<unknown>): Promise<boolean> {
  const marker = Symbol('pending');
  return (
    (await Promise.race([
      promise.then(
        () => 'done',
        () => 'failed',
      ),
      new Promise((r) => setTimeout(() => r(marker), 50)),
    ])) === marker
  );
}

describe('streamingHandler', () => {
  it('sends a string reply whole, then waits for the work queued after it', async () => {
    const work = later();
    const invoke = streamingHandler<AfterReplyContext>(async (_event, context) => {
      context.afterReply(work.promise);
      return { statusCode: 200, headers: { 'content-type': 'application/json' }, body: '{"ok":true}' };
    }) as Invoke;
    const out = sink();
    const ended = invoke({} as FunctionUrlEvent, out, {} as Context);
    await new Promise((resolve) => out.once('finish', resolve));
    expect(out.prelude).toEqual({ statusCode: 200, headers: { 'content-type': 'application/json' } });
    expect(out.received).toBe('{"ok":true}');
    // The client has its reply; the invocation is still settling.
    expect(await notYet(ended)).toBe(true);
    work.settle();
    await ended;
  });

  it('pipes a stream reply to its end', async () => {
    const invoke = streamingHandler<AfterReplyContext>(async () => ({
      statusCode: 200,
      headers: {},
      body: Readable.from(['data: 1\n\n', 'data: [DONE]\n\n']),
    })) as Invoke;
    const out = sink();
    await invoke({} as FunctionUrlEvent, out, {} as Context);
    expect(out.received).toBe('data: 1\n\ndata: [DONE]\n\n');
  });

  it('waits for queued work before failing, when the handler throws after queuing it', async () => {
    const work = later();
    const invoke = streamingHandler<AfterReplyContext>(async (_event, context) => {
      context.afterReply(work.promise);
      throw new Error('after the work was queued');
    }) as Invoke;
    const ended = invoke({} as FunctionUrlEvent, sink(), {} as Context);
    expect(await notYet(ended)).toBe(true);
    work.settle();
    await expect(ended).rejects.toThrow('after the work was queued');
  });

  it('ends the reply with the error of a body that fails, after the queued work', async () => {
    const work = later();
    const body = new PassThrough();
    const invoke = streamingHandler<AfterReplyContext>(async (_event, context) => {
      context.afterReply(work.promise);
      return { statusCode: 200, headers: {}, body } satisfies FunctionUrlResult;
    }) as Invoke;
    const out = sink();
    const ended = invoke({} as FunctionUrlEvent, out, {} as Context);
    body.write('data: 1\n\n');
    body.destroy(new Error('upstream gone'));
    expect(await notYet(ended)).toBe(true);
    work.settle();
    await expect(ended).rejects.toThrow('upstream gone');
    expect(out.destroyed).toBe(true);
  });
});
