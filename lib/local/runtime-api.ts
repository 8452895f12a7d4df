/**
 * The AWS side of a Lambda Function URL, on one machine: a Lambda Runtime API server for each
 * execution environment ("instance"), a pool of instances per function, and the Function URL's
 * translation between an HTTP request and an invocation.
 *
 * What runs inside an instance is a runtime client speaking the Runtime API over HTTP, exactly as in
 * Lambda: the emulator's own (`lambda-runtime.ts`, in a worker thread) or AWS's `aws-lambda-ric`
 * (the conformance suite, in a child process running Node 22). Both sit behind this same server,
 * so whatever the client sees is decided here and by the runtime client, never by a shortcut.
 *
 * Lambda's rules this follows (each checked against aws-lambda-ric by test/conformance):
 * - one invocation at a time per instance; a new instance (a cold start) when all are busy, up to
 *   `maxInstances`; past that an invocation waits for a free instance (Lambda would throttle: 429);
 * - a streamed response carries its status and headers as a JSON prelude and 8 NUL bytes at the
 *   start of the body (content type `application/vnd.awslambda.http-integration-response`), which
 *   the runtime client writes with the handler's first write: nothing reaches the client before it;
 * - an invocation ends when the runtime ends the response stream (not when the handler resolves);
 * - a function error (error trailers on the stream, the `/error` endpoint, or the runtime dying)
 *   is a 502 if no byte was sent yet, else the client's response is cut off (truncated);
 * - at the deadline (the function timeout) the instance is killed and the client's response is cut
 *   off (502 if nothing was sent); the next invocation gets a fresh instance.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

const PRELUDE_CONTENT_TYPE = 'application/vnd.awslambda.http-integration-response';
const PRELUDE_DELIMITER = Buffer.alloc(8);
const BASE = '/2018-06-01/runtime';

/** A running runtime client: the worker thread or child process of one instance. */
interface RuntimeProcess {
  /** Settles when the process or thread has gone. */
  exited: Promise<unknown>;
  kill(): void;
}

/** Starts a runtime client pointed at the Runtime API `host:port`, with the function's environment. */
export type Launcher = (runtimeApi: string, env: Record<string, string>) => RuntimeProcess;

export interface FunctionConfig {
  name: string;
  timeoutMs: number;
  memoryMb: number;
  /** Environment of every instance (Lambda's own variables are added). */
  env?: Record<string, string>;
  /** Most instances at once (Lambda's concurrency limit); default 4. */
  maxInstances?: number;
  /** Instances started before the first request; default 1. */
  warmInstances?: number;
}

/** What happened to the invocations, as Lambda's metrics count them. */
export interface FunctionStats {
  invocations: number;
  /** Function errors: error trailers, the `/error` endpoint, a runtime that died, or a timeout. */
  errors: number;
  timeouts: number;
  /** Instances started (cold starts). */
  coldStarts: number;
}

type Outcome = 'ok' | 'error' | 'timeout';

/** One invocation: the event, its deadline, and the client it answers. */
class Invocation {
  readonly id = randomUUID();
  /** Set once the client has been sent a status line. */
  private headersSent = false;
  private ended = false;
  private resolveDone!: (outcome: Outcome) => void;
  readonly done = new Promise<Outcome>((resolve) => {
    this.resolveDone = resolve;
  });

  /** Set when an instance takes the invocation: Lambda's timeout does not count the wait or the init. */
  deadline = 0;

  constructor(
    readonly event: unknown,
    readonly timeoutMs: number,
    readonly res: ServerResponse,
    readonly functionArn: string,
  ) {}

  get finished(): boolean {
    return this.ended;
  }

  head(status: number, headers: Record<string, string | string[]>): void {
    if (this.headersSent || this.ended) return;
    this.headersSent = true;
    if (this.res.destroyed) return;
    this.res.writeHead(status, headers);
    this.res.flushHeaders();
  }

  write(chunk: Buffer): void {
    if (this.ended || this.res.destroyed || this.res.writableEnded) return;
    this.res.write(chunk);
  }

  /** The response is complete. */
  finish(): void {
    if (this.ended) return;
    if (!this.headersSent) this.head(200, {});
    this.ended = true;
    if (!this.res.destroyed) this.res.end();
    this.resolveDone('ok');
  }

  /** A function error or timeout: a 502 if nothing was sent, else a cut-off response. */
  fail(outcome: 'error' | 'timeout'): void {
    if (this.ended) return;
    this.ended = true;
    if (!this.headersSent && !this.res.destroyed) {
      this.headersSent = true;
      this.res.writeHead(502, { 'content-type': 'application/json' });
      this.res.end(JSON.stringify({ message: 'Internal Server Error' }));
    } else if (!this.res.destroyed) {
      this.res.destroy();
    }
    this.resolveDone(outcome);
  }
}

/** One execution environment: a Runtime API server and the runtime client polling it. */
class Instance {
  private server: Server;
  private runtime: RuntimeProcess | undefined;
  /** The runtime's pending `GET /invocation/next`, while it waits for work. */
  private waiting: ServerResponse | undefined;
  current: Invocation | undefined;
  dead = false;
  initialised = false;
  private markReady!: () => void;
  /** Settles when the runtime first asks for work (its init is done), or the instance is gone. */
  readonly ready = new Promise<void>((resolve) => {
    this.markReady = resolve;
  });

  constructor(
    private readonly pool: FunctionPool,
    private readonly launcher: Launcher,
  ) {
    this.server = createServer((req, res) => {
      this.route(req, res).catch((error) => {
        console.error('[runtime-api] request failed', error);
        if (!res.headersSent) res.writeHead(500).end();
      });
    });
    // The runtime client takes a pooled socket for an invocation's response when the invocation
    // starts and writes to it only when the handler has something to send: a JSON reply after the
    // whole generation. Node's default 5 s keep-alive timeout closed that socket under it (a JSON
    // reply slower than 5 s was a 502). The Runtime API has no such limits; the function timeout is
    // enforced by the invocation's own timer.
    this.server.keepAliveTimeout = 0;
    this.server.requestTimeout = 0;
    this.server.headersTimeout = 0;
  }

  async start(env: Record<string, string>): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    const { port } = this.server.address() as AddressInfo;
    this.runtime = this.launcher(`127.0.0.1:${port}`, env);
    this.runtime.exited.then(
      () => this.die(),
      () => this.die(),
    );
  }

  get idle(): boolean {
    return !this.dead && this.waiting !== undefined && this.current === undefined;
  }

  /** Hands the invocation to the runtime waiting on `/next`. */
  dispatch(invocation: Invocation): void {
    const waiting = this.waiting;
    if (!waiting) throw new Error('instance is not waiting for work');
    this.waiting = undefined;
    this.current = invocation;
    invocation.deadline = Date.now() + invocation.timeoutMs;
    const timer = setTimeout(() => this.timeout(invocation), invocation.timeoutMs);
    invocation.done.then((outcome) => {
      clearTimeout(timer);
      this.pool.settled(outcome);
      if (this.current === invocation) this.current = undefined;
      this.pool.pump();
    });
    waiting.writeHead(200, {
      'content-type': 'application/json',
      'lambda-runtime-aws-request-id': invocation.id,
      'lambda-runtime-deadline-ms': String(invocation.deadline),
      'lambda-runtime-invoked-function-arn': invocation.functionArn,
      'lambda-runtime-trace-id': `Root=1-${Math.floor(Date.now() / 1000).toString(16)}-${randomUUID().replaceAll('-', '').slice(0, 24)};Sampled=0`,
    });
    waiting.end(JSON.stringify(invocation.event));
  }

  private timeout(invocation: Invocation): void {
    if (invocation.finished) return;
    console.error(
      `[runtime-api] ${this.pool.config.name}: task timed out after ${this.pool.config.timeoutMs} ms`,
    );
    invocation.fail('timeout');
    this.kill();
  }

  kill(): void {
    this.runtime?.kill();
    this.die();
  }

  private die(): void {
    if (this.dead) return;
    this.dead = true;
    this.markReady();
    this.waiting?.destroy();
    this.waiting = undefined;
    // The runtime went away mid-invocation (crash, process.exit): a function error.
    this.current?.fail('error');
    this.server.close();
    this.server.closeAllConnections();
    this.pool.removed(this);
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = req.url ?? '';
    if (req.method === 'GET' && path === `${BASE}/invocation/next`) {
      if (this.dead) {
        res.destroy();
        return;
      }
      this.initialised = true;
      this.markReady();
      this.waiting = res;
      this.pool.pump();
      return;
    }
    const match = /^\/2018-06-01\/runtime\/invocation\/([^/]+)\/(response|error)$/.exec(path);
    if (req.method === 'POST' && match) {
      const invocation = this.current;
      if (!invocation || invocation.id !== match[1]) {
        // Lambda refuses a response for an invocation that is not the current one (e.g. too late).
        await drain(req);
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ errorType: 'InvalidRequestID', errorMessage: 'Invalid request ID' }));
        return;
      }
      if (match[2] === 'error') {
        const body = await drain(req);
        logFunctionError(this.pool.config.name, req.headers['lambda-runtime-function-error-type'], body);
        invocation.fail('error');
      } else if (req.headers['lambda-runtime-function-response-mode'] === 'streaming') {
        await relayStream(req, invocation, this.pool.config.name);
      } else {
        relayBuffered(await drain(req), invocation);
      }
      if (!res.destroyed) {
        res.writeHead(202, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ status: 'OK' }));
      }
      return;
    }
    if (req.method === 'POST' && path === `${BASE}/init/error`) {
      const body = await drain(req);
      logFunctionError(this.pool.config.name, req.headers['lambda-runtime-function-error-type'], body);
      res.writeHead(202).end();
      this.kill();
      return;
    }
    await drain(req);
    res.writeHead(404).end();
  }
}

/** A function's instances and the invocations waiting for one. */
export class FunctionPool {
  private readonly instances = new Set<Instance>();
  private readonly queue: Invocation[] = [];
  readonly stats: FunctionStats = { invocations: 0, errors: 0, timeouts: 0, coldStarts: 0 };
  private closed = false;
  private readonly arn: string;
  private quiet: (() => void)[] = [];

  constructor(
    readonly config: FunctionConfig,
    private readonly launcher: Launcher,
  ) {
    this.arn = `arn:aws:lambda:local:000000000000:function:${config.name}`;
  }

  get instanceCount(): number {
    return this.instances.size;
  }

  /** Starts the warm instances and waits for their init, as provisioned environments are ready before traffic. */
  async warm(): Promise<void> {
    const n = this.config.warmInstances ?? 1;
    const started: Promise<void>[] = [];
    for (let i = this.instances.size; i < n; i++) started.push(this.spawn().ready);
    await Promise.all(started);
  }

  /** Runs one invocation; the client's response is written by the time this settles. */
  invoke(event: unknown, res: ServerResponse): Promise<Outcome> {
    const invocation = new Invocation(event, this.config.timeoutMs, res, this.arn);
    this.stats.invocations += 1;
    this.queue.push(invocation);
    this.pump();
    return invocation.done;
  }

  /** Matches waiting invocations with idle instances; starts instances for the rest, up to the limit. */
  pump(): void {
    this.checkQuiescent();
    if (this.closed) return;
    for (const instance of this.instances) {
      if (this.queue.length === 0) break;
      if (instance.idle) {
        const next = this.queue.shift() as Invocation;
        // An invocation whose client left while queued is still run, as Lambda would have.
        instance.dispatch(next);
      }
    }
    const starting = [...this.instances].filter((i) => !i.dead && !i.initialised).length;
    let toStart = this.queue.length - starting;
    while (toStart > 0 && this.instances.size < (this.config.maxInstances ?? 4)) {
      this.spawn();
      toStart -= 1;
    }
  }

  /**
   * Resolves once nothing runs: no invocation queued and every instance waiting for work. A handler
   * that works on after its reply (a settlement) is done by then, as Lambda awaits it.
   */
  quiescent(): Promise<void> {
    return new Promise((resolve) => {
      this.quiet.push(resolve);
      this.checkQuiescent();
    });
  }

  checkQuiescent(): void {
    if (this.quiet.length === 0) return;
    const busy = this.queue.length > 0 || [...this.instances].some((i) => !i.dead && !i.idle);
    if (busy) return;
    for (const resolve of this.quiet.splice(0)) resolve();
  }

  settled(outcome: Outcome): void {
    if (outcome !== 'ok') this.stats.errors += 1;
    if (outcome === 'timeout') this.stats.timeouts += 1;
  }

  removed(instance: Instance): void {
    this.instances.delete(instance);
    if (this.closed) return;
    // An instance that died before it asked for work failed its init: Lambda answers the
    // invocation that was waiting for it with an error rather than retrying forever.
    if (!instance.initialised && this.queue.length > 0 && !this.anyAlive()) {
      (this.queue.shift() as Invocation).fail('error');
    }
    this.pump();
  }

  private anyAlive(): boolean {
    return [...this.instances].some((i) => !i.dead);
  }

  private spawn(): Instance {
    const instance = new Instance(this, this.launcher);
    this.instances.add(instance);
    this.stats.coldStarts += 1;
    const env: Record<string, string> = {
      ...this.config.env,
      AWS_LAMBDA_FUNCTION_NAME: this.config.name,
      AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(this.config.memoryMb),
      AWS_LAMBDA_LOG_GROUP_NAME: `/aws/lambda/${this.config.name}`,
      AWS_LAMBDA_LOG_STREAM_NAME: `local/${randomUUID()}`,
    };
    instance.start(env).catch((error) => {
      console.error('[runtime-api] instance failed to start', error);
      instance.kill();
    });
    return instance;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const invocation of this.queue.splice(0)) invocation.fail('error');
    for (const instance of [...this.instances]) instance.kill();
  }
}

async function drain(req: IncomingMessage): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

function logFunctionError(fn: string, type: unknown, body: Buffer | string): void {
  let detail = String(body);
  try {
    const parsed = JSON.parse(detail) as { errorType?: string; errorMessage?: string };
    detail = `${parsed.errorType ?? type ?? 'Error'}: ${parsed.errorMessage ?? ''}`;
  } catch {}
  console.error(`[runtime-api] ${fn}: function error ${detail}`);
}

/** A streamed response: the prelude (if any) becomes the status and headers, the rest the body. */
async function relayStream(req: IncomingMessage, invocation: Invocation, fn: string): Promise<void> {
  const withPrelude = String(req.headers['content-type'] ?? '').startsWith(PRELUDE_CONTENT_TYPE);
  let pending: Buffer | undefined = withPrelude ? Buffer.alloc(0) : undefined;
  let started = false;
  const start = (status: number, headers: Record<string, string | string[]>) => {
    started = true;
    invocation.head(status, headers);
  };
  if (!withPrelude)
    start(200, { 'content-type': String(req.headers['content-type'] ?? 'application/octet-stream') });
  try {
    for await (const part of req) {
      const chunk = part as Buffer;
      if (pending === undefined) {
        invocation.write(chunk);
        continue;
      }
      pending = Buffer.concat([pending, chunk]);
      const end = pending.indexOf(PRELUDE_DELIMITER);
      if (end < 0) continue;
      const prelude = parsePrelude(pending.subarray(0, end));
      const rest = pending.subarray(end + PRELUDE_DELIMITER.length);
      pending = undefined;
      start(prelude.statusCode, prelude.headers);
      if (rest.length > 0) invocation.write(rest);
    }
  } catch {
    // The runtime's connection broke mid-stream: the runtime died (handled by the instance).
    return;
  }
  const errorType = req.trailers['lambda-runtime-function-error-type'];
  if (errorType) {
    const body = req.trailers['lambda-runtime-function-error-body'];
    logFunctionError(fn, errorType, body ? Buffer.from(body, 'base64') : '');
    invocation.fail('error');
    return;
  }
  if (!started) start(200, {});
  invocation.finish();
}

function parsePrelude(bytes: Buffer): { statusCode: number; headers: Record<string, string | string[]> } {
  const prelude = JSON.parse(bytes.toString('utf8')) as {
    statusCode?: number;
    headers?: Record<string, string>;
    cookies?: string[];
  };
  const headers: Record<string, string | string[]> = { ...(prelude.headers ?? {}) };
  if (prelude.cookies?.length) headers['set-cookie'] = prelude.cookies;
  return { statusCode: prelude.statusCode ?? 200, headers };
}

/** A buffered response, as a Function URL reads it (payload format 2.0). */
function relayBuffered(body: Buffer, invocation: Invocation): void {
  let result: unknown;
  try {
    result = JSON.parse(body.toString('utf8'));
  } catch {
    invocation.fail('error');
    return;
  }
  const shaped = result as {
    statusCode?: number;
    headers?: Record<string, string>;
    body?: string;
    isBase64Encoded?: boolean;
    cookies?: string[];
  } | null;
  if (shaped === null || typeof shaped !== 'object' || shaped.statusCode === undefined) {
    invocation.head(200, { 'content-type': 'application/json' });
    invocation.write(Buffer.from(typeof result === 'string' ? result : JSON.stringify(result)));
    invocation.finish();
    return;
  }
  const headers: Record<string, string | string[]> = { ...(shaped.headers ?? {}) };
  if (shaped.cookies?.length) headers['set-cookie'] = shaped.cookies;
  invocation.head(shaped.statusCode, headers);
  if (shaped.body !== undefined)
    invocation.write(shaped.isBase64Encoded ? Buffer.from(shaped.body, 'base64') : Buffer.from(shaped.body));
  invocation.finish();
}
