/**
 * The local stand-in for CloudFront and the Lambda Function URLs behind it, used
 * by `npm start`, the integration and contract tests and the benchmark. It behaves as the AWS path
 * does, so that what passes here passes there:
 * - a "CloudFront" port runs the viewer-request CloudFront Function, routes by path, as the
 *   distribution's behaviours do, and adds what CloudFront adds for that origin: the secret
 *   `x-origin-verify` header, and an origin access control's SigV4 signature (cloudfront.ts); each
 *   function also has a bare "Function URL" port that adds nothing (a request there gets the
 *   function's 403, or Lambda's own for an AWS_IAM URL, as in AWS);
 * - each request becomes a Function URL event (payload format 2.0) and an invocation of a function
 *   run by `runtime-api.ts`: one invocation at a time per instance, instances started on demand up
 *   to a limit, the function timeout enforced by killing the instance, errors contained to the
 *   invocation (502 before the first byte, a truncated response after);
 * - each instance is a worker thread running the handler module (TypeScript, through tsx) under
 *   the emulator's runtime client (`lambda-runtime.ts`, which follows AWS's aws-lambda-ric: the
 *   conformance suite in test/conformance runs the same probes against both). Worker threads
 *   rather than child processes: each has its own module state and heap (capped at the function's
 *   memory size) and can be terminated at the deadline, yet starts in a fraction of the time of a
 *   process and shares the parent's stdout, so `npm start` and the tests stay fast.
 *
 * Like Lambda, a streaming function gets no signal when the client goes away: writes after a
 * disconnect are dropped and the function runs to its end.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { MAX_REQUEST_BYTES, requestTooLarge } from '../../functions/shared/too-large.js';
import type { OriginSetup } from '../infra/edge-routes.js';
import {
  functionUrlRefusal,
  originRequestHeaders,
  PLAIN_ORIGIN,
  viewerRequestFunction,
} from './cloudfront.js';
import { type FunctionConfig, FunctionPool, type FunctionStats, type Launcher } from './runtime-api.js';

export interface EmulatedFunction {
  name: string;
  /** Absolute path of the handler module (TypeScript or JavaScript). */
  module: string;
  /** The handler's export name; default `handler`. */
  exportName?: string;
  /** The function timeout and memory size (lib/infra/function-settings.ts). */
  timeoutMs: number;
  memoryMb: number;
  /** Most instances at once; default 4. */
  maxInstances?: number;
  /** Instances started with the emulator; default 1. */
  warmInstances?: number;
  /** This function's own environment, over the emulator's (its role's credentials, as Lambda sets them). */
  env?: Record<string, string>;
}

export interface EmulatorOptions {
  host?: string;
  port?: number;
  /**
   * CloudFront's behaviours: the first route whose path matches wins; the last should be a catch-all.
   * `origin`: how CloudFront reaches the function and its URL's auth type (default PLAIN_ORIGIN).
   */
  routes: {
    match: (path: string) => boolean;
    fn: EmulatedFunction;
    origin?: OriginSetup;
    /** Whether the viewer-request function runs on this behaviour (default true). */
    viewerRequest?: boolean;
  }[];
  /** Added as `x-origin-verify` on the CloudFront port to an origin with `originHeader`, as CloudFront does. */
  originVerifyValue?: string;
  /** The viewer-request CloudFront Function's code, run on every request to the CloudFront port. */
  viewerRequest?: string;
  /** Largest request body accepted (a Function URL accepts 6 MB). */
  maxBodyBytes?: number;
  /** The functions' environment; default a copy of process.env at start. */
  env?: Record<string, string>;
  /**
   * Environment that names the emulator's own address (the dashboard's public origin, and its OpenID
   * provider's redirect URI): called with the CloudFront port's URL once that port is bound, before any
   * function instance starts, and added to every function's environment. The port is bound first so
   * that a port of 0 (a free one) can be named too.
   */
  originEnv?: (url: string) => Promise<Record<string, string>> | Record<string, string>;
  /** What runs an instance; default a worker thread with the emulator's runtime client. */
  launcher?: (fn: EmulatedFunction) => Launcher;
}

/** A request to the CloudFront port, once its response has ended (or its connection closed). */
export interface RequestDone {
  method: string;
  /** The path the client asked for, without its query string. */
  path: string;
  status: number;
  /** From the request's arrival to the end of its response. */
  ms: number;
  /** The response's `x-generation-id` (a completion's). */
  generationId: string | undefined;
}

/** One line a function instance wrote (without its newline), and to which of its streams. */
export type FunctionOutput = (fn: string, stream: 'stdout' | 'stderr', line: string) => void;

export interface RunningEmulator {
  /** The CloudFront stand-in. */
  url: string;
  port: number;
  server: Server;
  /** Each function's bare Function URL (no origin-verify header added), by function name. */
  functionUrls: Record<string, string>;
  /** Invocations, function errors, timeouts and cold starts, by function name. */
  stats(name: string): FunctionStats;
  /** Resolves once no function has an invocation running or queued (work after a reply included). */
  quiescent(): Promise<void>;
  /** Calls `listener` for every request to the CloudFront port once it is done (`npm start`'s console). */
  onRequestDone(listener: (done: RequestDone) => void): void;
  close(): Promise<void>;
}

const TEXT_TYPES = /^(text\/|application\/(json|x-www-form-urlencoded|xml|javascript))/i;

const RUNTIME_MODULE = fileURLToPath(new URL('./lambda-runtime.ts', import.meta.url));
// Resolved here (not in the worker) so the worker needs no module resolution before tsx is loaded.
const TSX_API = pathToFileURL(
  join(dirname(createRequire(import.meta.url).resolve('tsx/package.json')), 'dist/esm/api/index.mjs'),
).href;
const BOOT = `
const { workerData } = require('node:worker_threads');
import(workerData.tsx).then((tsx) => { tsx.register(); return import(workerData.runtime); });
`;

/**
 * An instance as a worker thread: own module state, heap capped at the function's memory size. Its
 * output is this process's own, or with `output`, handed over a line at a time.
 */
function workerLauncher(fn: EmulatedFunction, output?: FunctionOutput): Launcher {
  return (runtimeApi, env) => {
    const worker = new Worker(BOOT, {
      eval: true,
      env: { ...env, AWS_LAMBDA_RUNTIME_API: runtimeApi },
      execArgv: [],
      ...(output ? { stdout: true, stderr: true } : {}),
      workerData: {
        lambdaRuntime: true,
        tsx: TSX_API,
        runtime: pathToFileURL(RUNTIME_MODULE).href,
        module: fn.module,
        exportName: fn.exportName ?? 'handler',
      },
      resourceLimits: { maxOldGenerationSizeMb: fn.memoryMb },
    });
    if (output) {
      byLine(worker.stdout, (line) => output(fn.name, 'stdout', line));
      byLine(worker.stderr, (line) => output(fn.name, 'stderr', line));
    }
    const exited = new Promise((resolve) => {
      worker.on('exit', resolve);
      worker.on('error', (error) => {
        console.error(`[emulator] ${fn.name}: instance crashed`, error);
      });
    });
    return { exited, kill: () => void worker.terminate() };
  };
}

/** Worker-thread instances (the default launcher) whose output goes to `output`, a line at a time. */
export function workerLauncherWithOutput(output: FunctionOutput): (fn: EmulatedFunction) => Launcher {
  return (fn) => workerLauncher(fn, output);
}

/** Hands `readable`'s text over a line at a time (a last line without a newline at its end). */
function byLine(readable: Readable, line: (text: string) => void): void {
  let partial = '';
  readable.setEncoding('utf8');
  readable.on('data', (text: string) => {
    const lines = (partial + text).split('\n');
    partial = lines.pop() ?? '';
    for (const whole of lines) line(whole);
  });
  readable.on('end', () => {
    if (partial) line(partial);
    partial = '';
  });
}

/**
 * An instance in the caller's own thread: for tests that reach into a function's own module state
 * (a fault injected into its DynamoDB client, a mocked Secrets Manager). Every instance then shares
 * one module graph, and a deadline can only cut the client off, not stop the handler: Lambda's
 * isolation is what the worker launcher is for.
 */
export function inProcessLauncher(fn: EmulatedFunction): Launcher {
  return (runtimeApi, env) => {
    const exited = import('./lambda-runtime.js').then(({ runRuntime }) =>
      runRuntime({
        runtimeApi,
        module: fn.module,
        exportName: fn.exportName ?? 'handler',
        env,
        inProcess: true,
      }),
    );
    // Killing it closes its Runtime API server; the loop then ends on its own.
    return { exited, kill: () => {} };
  };
}

async function listen(server: Server, port: number, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'EADDRINUSE'
          ? new Error(
              `${host}:${port} is in use (is another \`npm start\` running?); set PORT to use another port`,
            )
          : error,
      ),
    );
    server.listen(port, host, resolve);
  });
  return (server.address() as AddressInfo).port;
}

export async function startEmulator(options: EmulatorOptions): Promise<RunningEmulator> {
  const host = options.host ?? '127.0.0.1';
  const maxBody = options.maxBodyBytes ?? MAX_REQUEST_BYTES;
  const env =
    options.env ??
    (Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined)) as Record<
      string,
      string
    >);
  const pools = new Map<string, FunctionPool>();
  const origins = new Map<string, OriginSetup>();
  /** The functions, once the CloudFront port's URL is known (originEnv); the emulator answers once they are ready. */
  const startFunctions = async (extraEnv: Record<string, string>) => {
    for (const { fn, origin } of options.routes) {
      if (pools.has(fn.name)) continue;
      origins.set(fn.name, origin ?? PLAIN_ORIGIN);
      const config: FunctionConfig = {
        name: fn.name,
        timeoutMs: fn.timeoutMs,
        memoryMb: fn.memoryMb,
        env: { ...env, ...extraEnv, ...fn.env },
        ...(fn.maxInstances !== undefined ? { maxInstances: fn.maxInstances } : {}),
        ...(fn.warmInstances !== undefined ? { warmInstances: fn.warmInstances } : {}),
      };
      pools.set(fn.name, new FunctionPool(config, (options.launcher ?? workerLauncher)(fn)));
    }
    // The warm instances of every function start together.
    await Promise.all([...pools.values()].map((pool) => pool.warm()));
    for (const name of pools.keys()) {
      const server = createServer(
        guard(async (req, res) => {
          const body = await readBody(req, maxBody);
          if (body === undefined) return answerTooLarge(res);
          const url = new URL(req.url ?? '/', `http://${req.headers.host ?? 'localhost'}`);
          await functionUrl(name, req, res, { url, headers: headersOf(req), body });
        }),
      );
      servers.push(server);
      functionUrls[name] = `http://${host}:${await listen(server, 0, host)}`;
    }
  };
  /** Settled once the functions have started: a request to the CloudFront port before then waits for it. */
  let functionsStarted!: () => void;
  const started = new Promise<void>((resolve) => {
    functionsStarted = resolve;
  });

  /** A Function URL: Lambda's own check of an AWS_IAM URL, then the request as an event, answered by one invocation. */
  const functionUrl = async (
    name: string,
    req: IncomingMessage,
    res: ServerResponse,
    request: { url: URL; headers: Record<string, string>; body: Buffer },
  ) => {
    const refused = functionUrlRefusal(origins.get(name) ?? PLAIN_ORIGIN, request.headers);
    if (refused) {
      res.writeHead(refused.statusCode, refused.headers);
      res.end(refused.body);
      return;
    }
    const pool = pools.get(name) as FunctionPool;
    await pool.invoke(toEvent(req, request.url, request.body, request.headers), res);
  };
  /**
   * A body over the limit, answered in front of the function, as the CloudFront function does in AWS
   * (lib/infra): OpenAI's error shape, a request id and the CORS headers, as every answer of the
   * service. This connection is not reused (its client may still be mid-request).
   */
  const answerTooLarge = (res: ServerResponse) => {
    const tooLarge = requestTooLarge(randomUUID(), maxBody);
    res.writeHead(tooLarge.statusCode, { ...tooLarge.headers, connection: 'close' });
    res.end(tooLarge.body);
  };
  const guard = (serve: (req: IncomingMessage, res: ServerResponse) => Promise<void>) => {
    return (req: IncomingMessage, res: ServerResponse) => {
      serve(req, res).catch((error) => {
        console.error('[emulator] request failed', error);
        if (!res.headersSent && !res.destroyed) {
          res.writeHead(502, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ message: 'Internal Server Error' }));
        } else if (!res.writableEnded) res.destroy();
      });
    };
  };

  const servers: Server[] = [];
  const functionUrls: Record<string, string> = {};

  const viewerRequest = options.viewerRequest ? viewerRequestFunction(options.viewerRequest) : undefined;
  const requestListeners: ((done: RequestDone) => void)[] = [];
  const server = createServer(
    guard(async (req, res) => {
      if (requestListeners.length > 0) observe(req, res, requestListeners);
      await started;
      // Read first (and an oversized body drained) so that an early answer leaves the connection usable.
      const body = await readBody(req, maxBody);
      const viewerUrl = new URL(req.url ?? '/', 'http://localhost');
      let headers = headersOf(req);
      const route = options.routes.find((r) => r.match(viewerUrl.pathname));
      if (viewerRequest && route?.viewerRequest !== false) {
        const method = req.method ?? 'GET';
        const edge = viewerRequest({ method, url: viewerUrl, headers, requestId: randomUUID() });
        if ('response' in edge) {
          const close = body === undefined ? { connection: 'close' } : {};
          res.writeHead(edge.response.statusCode, { ...edge.response.headers, ...close });
          res.end(edge.response.body);
          return;
        }
        headers = edge.headers;
      }
      // Too large without a Content-Length the viewer-request function could see (a chunked body).
      if (body === undefined) return answerTooLarge(res);
      if (!route) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ message: 'Not Found' }));
        return;
      }
      const functionPort = new URL(functionUrls[route.fn.name] as string);
      const url = new URL(`${viewerUrl.pathname}${viewerUrl.search}`, functionPort);
      const added = await originRequestHeaders(
        route.origin ?? PLAIN_ORIGIN,
        { method: req.method ?? 'GET', url, headers },
        options.originVerifyValue,
      );
      await functionUrl(route.fn.name, req, res, { url, headers: { ...headers, ...added }, body });
    }),
  );
  server.keepAliveTimeout = 65_000;
  servers.push(server);
  // The CloudFront port first (an address in use fails here, with nothing started), then the functions.
  const port = await listen(server, options.port ?? 0, host);
  try {
    await startFunctions(options.originEnv ? await options.originEnv(`http://${host}:${port}`) : {});
    functionsStarted();
  } catch (error) {
    // Nothing is left running: the function instances and the bare Function URLs close.
    await Promise.all([...pools.values()].map((pool) => pool.close()));
    for (const other of servers) {
      other.close();
      other.closeAllConnections();
    }
    throw error;
  }
  return {
    url: `http://${host}:${port}`,
    port,
    server,
    functionUrls,
    stats: (name) => {
      const pool = pools.get(name);
      if (!pool) throw new Error(`no function ${name}`);
      return { ...pool.stats };
    },
    quiescent: async () => {
      await Promise.all([...pools.values()].map((pool) => pool.quiescent()));
    },
    onRequestDone: (listener) => {
      requestListeners.push(listener);
    },
    close: async () => {
      await Promise.all([...pools.values()].map((p) => p.close()));
      await Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((resolve) => {
              s.close(() => resolve());
              s.closeAllConnections();
            }),
        ),
      );
    },
  };
}

/**
 * Tells `listeners` of the request once its response has ended: its status, and the generation id its
 * head carried (read as the head is written: a head given whole to writeHead is not kept by Node).
 */
function observe(req: IncomingMessage, res: ServerResponse, listeners: ((done: RequestDone) => void)[]) {
  const started = performance.now();
  let generationId: string | undefined;
  const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => ServerResponse;
  (res as unknown as { writeHead: (...args: unknown[]) => ServerResponse }).writeHead = (...args) => {
    generationId = headerIn(args.at(-1), 'x-generation-id');
    return writeHead(...args);
  };
  res.once('close', () => {
    const done: RequestDone = {
      method: req.method ?? 'GET',
      path: new URL(req.url ?? '/', 'http://localhost').pathname,
      status: res.statusCode,
      ms: Math.round(performance.now() - started),
      generationId,
    };
    for (const listener of listeners) listener(done);
  });
}

/** A header's value among writeHead's headers (an object, or a flat array of names and values). */
function headerIn(headers: unknown, name: string): string | undefined {
  if (Array.isArray(headers)) {
    for (let i = 0; i + 1 < headers.length; i += 2)
      if (String(headers[i]).toLowerCase() === name) return String(headers[i + 1]);
    return undefined;
  }
  if (typeof headers !== 'object' || headers === null) return undefined;
  for (const [key, value] of Object.entries(headers))
    if (key.toLowerCase() === name) return Array.isArray(value) ? String(value[0]) : String(value);
  return undefined;
}

/**
 * The request body, or undefined when it is larger than `maxBytes`. An oversized body is still read to
 * its end (and thrown away), up to 4 x the limit, so the client can finish sending and read the 413;
 * past that the connection is cut.
 */
function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    req.on('data', (part: Buffer) => {
      size += part.length;
      if (size > maxBytes * 4) req.destroy();
      else if (size > maxBytes) parts.length = 0;
      else parts.push(part);
    });
    req.on('end', () => resolve(size > maxBytes ? undefined : Buffer.concat(parts)));
    req.on('error', reject);
    req.on('close', () => {
      if (!req.complete) resolve(undefined);
    });
  });
}

/** The request's headers, lower-case, repeated ones joined with commas (as a Function URL event has them). */
function headersOf(req: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    headers[name.toLowerCase()] = Array.isArray(value) ? value.join(',') : value;
  }
  return headers;
}

/** A Function URL event (payload format 2.0). */
function toEvent(req: IncomingMessage, url: URL, body: Buffer, headers: Record<string, string>) {
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
