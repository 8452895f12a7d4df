/**
 * The probe function of the conformance suite: one streaming handler whose path picks a behaviour
 * (stream, status prelude, error before or after the first write, early return, deadline,
 * disconnect, uncaught exception) and a `/state` path that reports what the instance saw. Run both
 * by the emulator (as TypeScript) and, bundled as the stack bundles, by AWS's aws-lambda-ric.
 */
import { randomUUID } from 'node:crypto';
import type { Writable } from 'node:stream';

interface ProbeEvent {
  rawPath: string;
}
interface ProbeContext {
  functionName: string;
  memoryLimitInMB: string;
  getRemainingTimeInMillis(): number;
}
declare const awslambda: {
  streamifyResponse(
    fn: (event: ProbeEvent, stream: Writable, context: ProbeContext) => Promise<void>,
  ): unknown;
  HttpResponseStream: {
    from(stream: Writable, prelude: { statusCode: number; headers?: Record<string, string> }): Writable;
  };
};

const INSTANCE = randomUUID();
let inFlight = 0;
let maxInFlight = 0;
let disconnectFinished = false;
let remainingAtStart = 0;
const reply = (out: Writable, text: string) => {
  out.write(text);
  out.end();
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const handler = awslambda.streamifyResponse(async (event, stream, context) => {
  inFlight += 1;
  maxInFlight = Math.max(maxInFlight, inFlight);
  const http = (statusCode: number, headers: Record<string, string> = { 'content-type': 'text/plain' }) =>
    awslambda.HttpResponseStream.from(stream, { statusCode, headers });
  try {
    switch (event.rawPath.replace(/^\/pool/, '')) {
      case '/stream': {
        const out = http(200);
        for (let i = 0; i < 3; i++) {
          out.write(`chunk ${i}\n`);
          await sleep(20);
        }
        out.end();
        return;
      }
      case '/status': {
        const out = http(418, { 'content-type': 'text/plain', 'x-probe': 'prelude' });
        out.write('teapot');
        out.end();
        return;
      }
      case '/end-with-chunk':
        // end(chunk) is not a write: the prelude is never sent.
        http(201, { 'content-type': 'text/plain', 'x-probe': 'end-chunk' }).end('ended');
        return;
      case '/raw':
        // No prelude: the runtime's default content type, status 200.
        stream.write('raw bytes');
        stream.end();
        return;
      case '/end-without-write':
        http(201, { 'content-type': 'text/plain', 'x-probe': 'unwritten' });
        stream.end();
        return;
      case '/throw-before':
        http(200);
        throw new Error('thrown before the first write');
      case '/throw-after': {
        const out = http(200);
        out.write('partial');
        await sleep(50);
        throw new Error('thrown after the first write');
      }
      case '/early-return':
        // Resolves without ending the stream: the runtime waits for it, until the deadline.
        http(200).write('early');
        return;
      case '/deadline': {
        remainingAtStart = context.getRemainingTimeInMillis();
        const out = http(200);
        for (;;) {
          out.write('.');
          await sleep(100);
        }
      }
      case '/disconnect': {
        const out = http(200);
        out.write('first');
        await sleep(300);
        out.write('second');
        out.end();
        disconnectFinished = true;
        return;
      }
      case '/uncaught': {
        const out = http(200);
        out.write('before the crash');
        setTimeout(() => {
          throw new Error('uncaught in a timer');
        }, 20);
        await sleep(2_000);
        out.end();
        return;
      }
      case '/sleep':
        // Long enough that a second instance's cold start lands while the first is still busy, even
        // on a busy machine (at 300 ms a slow start let one instance serve all three in a CI run).
        await sleep(2_000);
        reply(http(200, { 'content-type': 'application/json' }), JSON.stringify({ instance: INSTANCE }));
        return;
      default:
        reply(
          http(200, { 'content-type': 'application/json' }),
          JSON.stringify({
            instance: INSTANCE,
            maxInFlight,
            disconnectFinished,
            remainingAtStart,
            remainingNow: context.getRemainingTimeInMillis(),
            memory: context.memoryLimitInMB,
            functionName: context.functionName,
          }),
        );
    }
  } finally {
    inFlight -= 1;
  }
});
