/**
 * The outermost layer of a response-streaming function: the middy chain answers a result (status,
 * headers, a body as a string or a stream), which goes out as the Function URL's reply; then the
 * work the invocation queued for after its reply (a completion's settlement) is awaited before the
 * invocation ends. The client never waits for the ledger, yet nothing is left pending when the
 * handler returns, as Lambda requires (its Node 24 runtime no longer waits for pending promises, and
 * a frozen environment would leave a generation unbilled).
 *
 * Not middy's own `streamifyResponse` option, which sends every reply through `stream.pipeline`:
 * each pipeline makes an AbortController and, when it finishes, a DOMException (a stack trace
 * captured per reply), and a string body goes through `Readable.from` as separate writes, its end in
 * a later write. Here a string body is one write and the end, in one turn (one write to the Runtime
 * API's socket), and a stream is piped.
 */
import type { Readable, Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { Context } from 'aws-lambda';
import type { FunctionUrlEvent, FunctionUrlResult } from './http.js';
import { markInvocation, withServerTiming } from './server-timing.js';

export interface AfterReplyContext extends Context {
  /** Runs `work` now; the invocation ends only once it has settled. It must not reject. */
  afterReply(work: Promise<void>): void;
}

/** The response stream aws-lambda-ric hands a streaming handler (a chunked request to the Runtime API). */
type ResponseStream = Writable;

declare const awslambda: {
  streamifyResponse(
    handler: (event: FunctionUrlEvent, responseStream: ResponseStream, context: Context) => Promise<void>,
  ): unknown;
  HttpResponseStream: {
    from(
      stream: ResponseStream,
      prelude: { statusCode: number; headers: Record<string, string> },
    ): ResponseStream;
  };
};

export function streamingHandler<C extends AfterReplyContext>(
  handler: (event: FunctionUrlEvent, context: C) => Promise<FunctionUrlResult>,
): unknown {
  return awslambda.streamifyResponse(async (event, responseStream, lambdaContext) => {
    markInvocation();
    const pending: Promise<void>[] = [];
    const context = lambdaContext as C;
    context.afterReply = (work) => {
      pending.push(work);
    };
    try {
      const { statusCode, headers, body } = await handler(event, context);
      const prelude = { statusCode, headers: withServerTiming(headers) };
      await send(body, awslambda.HttpResponseStream.from(responseStream, prelude));
    } finally {
      // Whatever became of the reply (sent, failed, or never made), queued work ends first.
      await Promise.allSettled(pending);
    }
  });
}

async function send(body: string | Readable, stream: ResponseStream): Promise<void> {
  if (typeof body === 'string') {
    // `write`, not `end(body)`: the runtime client sends the status and headers with the first write.
    stream.write(body);
    stream.end();
  } else {
    // A failed body ends the reply with the runtime's error trailers (the stream is destroyed with it).
    body.once('error', (error) => stream.destroy(error));
    body.pipe(stream);
  }
  await finished(stream);
}
