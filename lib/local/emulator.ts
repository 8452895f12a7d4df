import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import type { Context } from 'aws-lambda';

/**
 * A Lambda Function URL emulator: turns each HTTP request into a Function URL event (payload
 * format 2.0) and invokes the same middy handlers Lambda runs. Streaming handlers get the
 * `awslambda.streamifyResponse` / `HttpResponseStream.from` contract; buffered ones return a result.
 *
 * Like Lambda, a streaming function gets no signal when the client goes away: writes after a
 * disconnect are dropped and the function runs to its end.
 */

const STREAMING = Symbol.for('emulator.streamifyResponse');

interface Prelude {
  statusCode?: number;
  headers?: Record<string, string>;
  cookies?: string[];
}

/** The response stream a streaming handler writes to: bytes go to the client while it is connected. */
class ResponseStream extends Writable {
  private headSent = false;

  constructor(private readonly res: ServerResponse) {
    super();
  }

  setPrelude(prelude: Prelude): void {
    if (this.headSent) return;
    this.headSent = true;
    const headers: Record<string, string | string[]> = { ...(prelude.headers ?? {}) };
    if (prelude.cookies?.length) headers['set-cookie'] = prelude.cookies;
    if (!this.res.destroyed) {
      this.res.writeHead(prelude.statusCode ?? 200, headers);
      this.res.flushHeaders();
    }
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (!this.headSent)
      this.setPrelude({ statusCode: 200, headers: { 'content-type': 'application/octet-stream' } });
    if (this.res.destroyed || this.res.writableEnded) {
      callback();
      return;
    }
    this.res.write(chunk, () => callback());
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (!this.headSent) this.setPrelude({ statusCode: 200 });
    if (!this.res.destroyed && !this.res.writableEnded) this.res.end(() => callback());
    else callback();
  }
}

type StreamingHandler = (event: unknown, stream: Writable, context: Context) => Promise<unknown>;
type BufferedHandler = (event: unknown, context: Context) => Promise<unknown>;

/** Installs the globals the Lambda Node.js runtime provides to streaming functions. Idempotent. */
export function installLambdaGlobals(): void {
  // Other libraries (the AWS SDK's invoke store) may have created `awslambda` already: add to it.
  const g = globalThis as { awslambda?: Record<string, unknown> };
  g.awslambda ??= {};
  g.awslambda.streamifyResponse ??= (fn: StreamingHandler) => {
    Object.defineProperty(fn, STREAMING, { value: true });
    return fn;
  };
  g.awslambda.HttpResponseStream ??= {
    from(stream: ResponseStream, prelude: Prelude) {
      stream.setPrelude(prelude);
      return stream;
    },
  };
}

export interface EmulatedFunction {
  name: string;
  /** The handler module's `handler` export, loaded after the Lambda globals are installed. */
  load: () => Promise<unknown>;
  timeoutMs: number;
}

export interface EmulatorOptions {
  host?: string;
  port?: number;
  /** CloudFront's behaviours: the first route whose path matches wins; the last should be a catch-all. */
  routes: { match: (path: string) => boolean; fn: EmulatedFunction }[];
  /** Added as `x-origin-verify`, as CloudFront does. */
  originVerifyValue?: string;
  /** Largest request body accepted (a Function URL accepts 6 MB). */
  maxBodyBytes?: number;
}

export interface RunningEmulator {
  url: string;
  port: number;
  server: Server;
  close(): Promise<void>;
}

const TEXT_TYPES = /^(text\/|application\/(json|x-www-form-urlencoded|xml|javascript))/i;

export async function startEmulator(options: EmulatorOptions): Promise<RunningEmulator> {
  installLambdaGlobals();
  const handlers = new Map<string, Promise<unknown>>();
  const handlerOf = (fn: EmulatedFunction) => {
    let loaded = handlers.get(fn.name);
    if (!loaded) {
      loaded = fn.load();
      handlers.set(fn.name, loaded);
    }
    return loaded;
  };
  const maxBody = options.maxBodyBytes ?? 6 * 1024 * 1024;

  const server = createServer(async (req, res) => {
    try {
      const body = await readBody(req, maxBody);
      if (body === undefined) {
        res.writeHead(413, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ message: 'Request Entity Too Large' }));
        return;
      }
      const url = new URL(req.url ?? '/', 'http://localhost');
      const route = options.routes.find((r) => r.match(url.pathname));
      if (!route) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ message: 'Not Found' }));
        return;
      }
      const event = toEvent(req, url, body, options.originVerifyValue);
      const deadline = Date.now() + route.fn.timeoutMs;
      const context = toContext(route.fn, event.requestContext.requestId, deadline);
      const handler = (await handlerOf(route.fn)) as StreamingHandler | BufferedHandler;
      if ((handler as unknown as Record<symbol, unknown>)[STREAMING]) {
        await invokeStreaming(handler as StreamingHandler, event, context, res);
      } else {
        await invokeBuffered(handler as BufferedHandler, event, context, res);
      }
    } catch (error) {
      // Lambda answers an unhandled function error with a 502.
      console.error('[emulator] function error', error);
      if (!res.headersSent && !res.destroyed) {
        res.writeHead(502, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ message: 'Internal Server Error' }));
      } else if (!res.writableEnded) {
        res.destroy();
      }
    }
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) =>
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve),
  );
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://${options.host ?? '127.0.0.1'}:${port}`,
    port,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function invokeStreaming(
  handler: StreamingHandler,
  event: unknown,
  context: Context,
  res: ServerResponse,
) {
  const stream = new ResponseStream(res);
  await handler(event, stream, context);
  if (!stream.writableFinished) await new Promise<void>((resolve) => stream.end(resolve));
}

async function invokeBuffered(
  handler: BufferedHandler,
  event: unknown,
  context: Context,
  res: ServerResponse,
) {
  const result = (await handler(event, context)) as
    | {
        statusCode?: number;
        headers?: Record<string, string>;
        body?: string;
        isBase64Encoded?: boolean;
        cookies?: string[];
      }
    | string
    | undefined;
  if (typeof result === 'string' || result === undefined || result.statusCode === undefined) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(typeof result === 'string' ? result : JSON.stringify(result ?? null));
    return;
  }
  const headers: Record<string, string | string[]> = { ...(result.headers ?? {}) };
  if (result.cookies?.length) headers['set-cookie'] = result.cookies;
  res.writeHead(result.statusCode, headers);
  res.end(
    result.body === undefined
      ? ''
      : result.isBase64Encoded
        ? Buffer.from(result.body, 'base64')
        : result.body,
  );
}

async function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer | undefined> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of req) {
    size += (part as Buffer).length;
    if (size > maxBytes) return undefined;
    parts.push(part as Buffer);
  }
  return Buffer.concat(parts);
}

function toEvent(req: IncomingMessage, url: URL, body: Buffer, originVerifyValue: string | undefined) {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    headers[name.toLowerCase()] = Array.isArray(value) ? value.join(',') : value;
  }
  if (originVerifyValue !== undefined) headers['x-origin-verify'] = originVerifyValue;
  const queryStringParameters: Record<string, string> = {};
  for (const [name, value] of url.searchParams) {
    queryStringParameters[name] = queryStringParameters[name]
      ? `${queryStringParameters[name]},${value}`
      : value;
  }
  const isText = body.length === 0 || TEXT_TYPES.test(headers['content-type'] ?? '');
  const now = new Date();
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: url.pathname,
    rawQueryString: url.search.slice(1),
    headers,
    ...(url.search ? { queryStringParameters } : {}),
    requestContext: {
      accountId: 'anonymous',
      apiId: 'local',
      domainName: headers.host ?? 'localhost',
      domainPrefix: 'local',
      http: {
        method: req.method ?? 'GET',
        path: url.pathname,
        protocol: `HTTP/${req.httpVersion}`,
        sourceIp: req.socket.remoteAddress ?? '127.0.0.1',
        userAgent: headers['user-agent'] ?? '',
      },
      requestId: randomUUID(),
      routeKey: '$default',
      stage: '$default',
      time: now.toISOString(),
      timeEpoch: now.getTime(),
    },
    ...(body.length > 0 ? { body: isText ? body.toString('utf8') : body.toString('base64') } : {}),
    isBase64Encoded: !isText,
  };
}

function toContext(fn: EmulatedFunction, requestId: string, deadline: number): Context {
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName: fn.name,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:local:000000000000:function:${fn.name}`,
    memoryLimitInMB: '1024',
    awsRequestId: requestId,
    logGroupName: `/aws/lambda/${fn.name}`,
    logStreamName: 'local',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}
