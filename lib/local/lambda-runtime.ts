/**
 * The emulator's Lambda runtime client: what runs inside one emulated execution environment (a
 * worker thread, so each instance has its own module state). It speaks the Lambda Runtime API over
 * HTTP to `runtime-api.ts` and follows AWS's `aws-lambda-ric` on every point the conformance suite
 * probes (test/conformance):
 * - the `awslambda` globals: `streamifyResponse` marks a handler as streaming;
 *   `HttpResponseStream.from` only sets the content type and arranges for the prelude (JSON and 8
 *   NUL bytes) to be written with the first write, so nothing is sent before the handler writes;
 * - a streamed response is one chunked `POST .../response` (response mode `streaming`), opened by
 *   the first write; an error thrown after that ends it with the error trailers
 *   `Lambda-Runtime-Function-Error-Type` / `-Body` (base64 JSON);
 * - when the handler resolves, the runtime waits for the stream to end (it never ends it itself),
 *   then reports "Response stream is not finished." if it was not;
 * - an uncaught exception or unhandled rejection ends the environment (4.x installs no handler
 *   for them: the process dies, and the Runtime API fails the invocation);
 * - `end(chunk)` is the plain request's `end`: its chunk bypasses the first-write hook, so a
 *   prelude set with `HttpResponseStream.from` is not sent by it (only `write` sends it);
 * - the context: deadline from `Lambda-Runtime-Deadline-Ms`, memory and names from the
 *   environment, `callbackWaitsForEmptyEventLoop` true.
 */
import { Agent, type ClientRequest, request } from 'node:http';
import { pathToFileURL } from 'node:url';
import { isMainThread, workerData } from 'node:worker_threads';

const STREAMING = Symbol.for('aws.lambda.runtime.handler.streaming');
const PRELUDE_CONTENT_TYPE = 'application/vnd.awslambda.http-integration-response';

interface RuntimeStream extends ClientRequest {
  setContentType(type: string): void;
  _onBeforeFirstWrite?: (write: (chunk: string | Uint8Array) => void) => void;
}

type Handler = (event: unknown, second: unknown, third?: unknown) => unknown;

const base = '/2018-06-01/runtime';

export interface RuntimeOptions {
  /** The Runtime API's `host:port`. */
  runtimeApi: string;
  /** The handler module's absolute path, and its export. */
  module: string;
  exportName: string;
  /** Lambda's variables (function name, memory size...) for the context. */
  env: Record<string, string | undefined>;
  /**
   * In the caller's own thread (tests that reach into a function's module state): no process-wide
   * error handlers and no exit; the loop ends when the Runtime API goes away.
   */
  inProcess?: boolean;
}

function installGlobals(): void {
  const g = globalThis as { awslambda?: Record<string, unknown> };
  g.awslambda ??= {};
  g.awslambda.streamifyResponse = (handler: Handler) => {
    Object.defineProperty(handler, STREAMING, { value: 'response', configurable: true });
    return handler;
  };
  g.awslambda.HttpResponseStream = {
    from(stream: RuntimeStream, prelude: unknown) {
      stream.setContentType(PRELUDE_CONTENT_TYPE);
      const json = JSON.stringify(prelude);
      stream._onBeforeFirstWrite = (write) => {
        write(json);
        write(new Uint8Array(8));
      };
      return stream;
    },
  };
}

interface Rapi {
  host: string;
  port: string;
  agent: Agent;
}

function call(
  rapi: Rapi,
  method: string,
  path: string,
  body?: string,
  headers: Record<string, string> = {},
): Promise<{ headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ ...rapi, method, path, headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(parts).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

function errorBody(error: unknown): { errorType: string; errorMessage: string; trace: string[] } {
  if (error instanceof Error)
    return {
      errorType: error.name,
      errorMessage: error.message,
      trace: (error.stack ?? '').split('\n'),
    };
  return { errorType: 'Error', errorMessage: String(error), trace: [] };
}

async function postError(rapi: Rapi, id: string, error: unknown): Promise<void> {
  const body = errorBody(error);
  await call(rapi, 'POST', `${base}/invocation/${id}/error`, JSON.stringify(body), {
    'content-type': 'application/json',
    'lambda-runtime-function-error-type': body.errorType,
  });
}

/** The response stream: a chunked POST that the first write (or the end) opens. */
function openStream(rapi: Rapi, id: string): { stream: RuntimeStream; acknowledged: Promise<void> } {
  let acknowledge!: () => void;
  let refuse!: (e: Error) => void;
  const acknowledged = new Promise<void>((resolve, reject) => {
    acknowledge = resolve;
    refuse = reject;
  });
  const req = request(
    {
      ...rapi,
      method: 'POST',
      path: `${base}/invocation/${id}/response`,
      headers: {
        'Lambda-Runtime-Function-Response-Mode': 'streaming',
        Trailer: ['Lambda-Runtime-Function-Error-Type', 'Lambda-Runtime-Function-Error-Body'],
        'Content-Type': 'application/octet-stream',
      },
    },
    (res) => {
      res.resume();
      res.on('end', acknowledge);
      res.on('aborted', () => refuse(new Error('response aborted')));
    },
  ) as RuntimeStream;
  req.on('error', (e) => {
    refuse(e);
    req.destroy(e);
  });
  let written = false;
  req.setContentType = (type: string) => {
    if (written) throw new Error('Cannot set content-type, too late.');
    req.setHeader('Content-Type', type);
  };
  const write = req.write.bind(req) as (chunk: unknown, ...rest: unknown[]) => boolean;
  req.write = ((chunk: unknown, ...rest: unknown[]) => {
    const data =
      typeof chunk === 'string' || Buffer.isBuffer(chunk) || chunk instanceof Uint8Array
        ? chunk
        : JSON.stringify(chunk);
    if (!written && typeof req._onBeforeFirstWrite === 'function') req._onBeforeFirstWrite((c) => write(c));
    written = true;
    return write(data, ...rest);
  }) as RuntimeStream['write'];
  acknowledged.catch(() => {});
  return { stream: req, acknowledged };
}

/** Ends the stream with the error trailers, as the runtime reports a function error mid-stream. */
function failStream(stream: RuntimeStream, error: unknown): Promise<void> {
  console.error('Invoke Error', error);
  const body = errorBody(error);
  return new Promise((resolve) => {
    if (stream.writableEnded) {
      resolve();
      return;
    }
    stream.addTrailers({
      'Lambda-Runtime-Function-Error-Type': body.errorType,
      'Lambda-Runtime-Function-Error-Body': Buffer.from(JSON.stringify(body)).toString('base64'),
    });
    stream.end(() => resolve());
  });
}

function contextOf(
  headers: Record<string, string | string[] | undefined>,
  env: Record<string, string | undefined>,
) {
  const deadline = Number(headers['lambda-runtime-deadline-ms']);
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: env.AWS_LAMBDA_FUNCTION_NAME,
    functionVersion: env.AWS_LAMBDA_FUNCTION_VERSION,
    memoryLimitInMB: env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
    logGroupName: env.AWS_LAMBDA_LOG_GROUP_NAME,
    logStreamName: env.AWS_LAMBDA_LOG_STREAM_NAME,
    invokedFunctionArn: headers['lambda-runtime-invoked-function-arn'],
    awsRequestId: headers['lambda-runtime-aws-request-id'],
    getRemainingTimeInMillis: () => deadline - Date.now(),
  };
}

async function invokeStreaming(rapi: Rapi, handler: Handler, id: string, event: unknown, context: object) {
  const { stream, acknowledged } = openStream(rapi, id);
  try {
    const result = handler(event, stream, context);
    if (!(result instanceof Promise) && typeof (result as { then?: unknown })?.then !== 'function') {
      await failStream(stream, 'Streaming does not support non-async handlers.');
      return;
    }
    await result;
    // The runtime waits for the stream to end: it never ends it for the handler.
    await acknowledged;
    if (!stream.writableFinished) await failStream(stream, 'Response stream is not finished.');
  } catch (error) {
    await failStream(stream, error);
  }
}

async function invokeBuffered(rapi: Rapi, handler: Handler, id: string, event: unknown, context: object) {
  let result: unknown;
  try {
    result = await handler(event, context);
  } catch (error) {
    console.error('Invoke Error', error);
    await postError(rapi, id, error);
    return;
  }
  await call(rapi, 'POST', `${base}/invocation/${id}/response`, JSON.stringify(result ?? null), {
    'content-type': 'application/json',
  });
}

/** The runtime loop: init (load the handler), then one invocation after another, forever. */
export async function runRuntime(options: RuntimeOptions): Promise<void> {
  const [host = '127.0.0.1', port = ''] = options.runtimeApi.split(':');
  const rapi: Rapi = { host, port, agent: new Agent({ keepAlive: true, maxSockets: 2 }) };
  // No handler for uncaught exceptions or unhandled rejections, as in aws-lambda-ric 4.x: the
  // environment dies (here the worker thread ends) and the Runtime API reports the invocation failed.
  installGlobals();
  let handler: Handler;
  try {
    handler = (await import(pathToFileURL(options.module).href))[options.exportName] as Handler;
    if (typeof handler !== 'function')
      throw new Error(`${options.module} has no export ${options.exportName}`);
  } catch (error) {
    console.error('Init Error', error);
    const body = errorBody(error);
    await call(rapi, 'POST', `${base}/init/error`, JSON.stringify(body), {
      'lambda-runtime-function-error-type': body.errorType,
    }).catch(() => {});
    if (!options.inProcess) process.exit(1);
    return;
  }
  const streaming = (handler as unknown as Record<symbol, unknown>)[STREAMING] === 'response';
  try {
    for (;;) {
      const next = await call(rapi, 'GET', `${base}/invocation/next`);
      const id = String(next.headers['lambda-runtime-aws-request-id']);
      const event = JSON.parse(next.body) as unknown;
      const context = contextOf(next.headers, options.env);
      if (streaming) await invokeStreaming(rapi, handler, id, event, context);
      else await invokeBuffered(rapi, handler, id, event, context);
    }
  } catch (error) {
    // The Runtime API went away: the environment was shut down (killed at a deadline, or closed).
    if (!options.inProcess) throw error;
  } finally {
    rapi.agent.destroy();
  }
}

if (!isMainThread && (workerData as { lambdaRuntime?: boolean } | undefined)?.lambdaRuntime) {
  const data = workerData as { module: string; exportName: string };
  await runRuntime({
    runtimeApi: process.env.AWS_LAMBDA_RUNTIME_API ?? '',
    module: data.module,
    exportName: data.exportName,
    env: process.env,
  });
}
