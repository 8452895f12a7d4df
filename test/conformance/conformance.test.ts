/**
 * The conformance suite (issue 13): the same probes run against the emulator's runtime client and
 * against AWS's own `aws-lambda-ric` (Node 22) running the bundles built with the stack's esbuild
 * settings, both behind the same Runtime API server and Function URL front (lib/local/runtime-api.ts).
 * Each probe asserts what the emulator does, then that the runtime client does exactly the same.
 *
 * Without the runtime installed (a plain `npm test`) the comparison is skipped with a message; in CI
 * (CI=true) it must run: `.ci/run` installs it with scripts/install-lambda-runtime.sh.
 */
import { request } from 'node:http';
import { join } from 'node:path';
import { format } from 'node:util';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { REPO_ROOT } from '../../lib/infra/service-function.js';
import { bundle, ricLauncher, runtimeInstalled } from '../../lib/local/aws-lambda-ric.js';
import { type RunningEmulator, startEmulator, workerLauncherWithOutput } from '../../lib/local/emulator.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

const RIC = runtimeInstalled();
const IN_CI = process.env.CI === 'true';
const TIMEOUT_MS = 1_500;
const MEMORY_MB = 384;

interface Side {
  emulator: RunningEmulator;
  target: Target;
  key: string;
}
let emulated: Side;
let ric: Side | undefined;
let compared = 0;

/**
 * What the probe instances, the emulator and its Runtime API say during a test: several probes fail on
 * purpose (a throw, a timeout, a crash), and each such failure is reported with its stack trace, as
 * Lambda logs it. Kept here for the test's length and printed only if the test fails, so a green run
 * is quiet and a red one shows everything that was said.
 */
const testLog: string[] = [];
beforeEach(({ onTestFailed }) => {
  testLog.length = 0;
  vi.spyOn(console, 'error').mockImplementation((...args: unknown[]) => {
    testLog.push(format(...args));
  });
  onTestFailed(() => {
    if (testLog.length > 0) process.stderr.write(`${testLog.join('\n')}\n`);
  });
});
afterEach(() => {
  vi.restoreAllMocks();
});

async function startSide(launcher?: ReturnType<typeof ricLauncher>): Promise<Side> {
  const probe = (name: string, maxInstances: number, timeoutMs = TIMEOUT_MS) => ({
    name,
    module: join(REPO_ROOT, 'test/conformance/probe-handler.ts'),
    timeoutMs,
    memoryMb: MEMORY_MB,
    maxInstances,
  });
  const emulator = await startEmulator({
    routes: [
      // Its invocations sleep 2 s (/sleep), longer than the probe's own timeout allows.
      { match: (p) => p.startsWith('/pool/'), fn: probe('probe-pool', 2, 10_000) },
      { match: () => true, fn: probe('probe', 1) },
    ],
    // The emulator's instances' output into the test log (the RIC's is dropped: aws-lambda-ric.ts).
    launcher:
      launcher ?? workerLauncherWithOutput((fn, stream, line) => testLog.push(`[${fn} ${stream}] ${line}`)),
  });
  const target = await startTarget(launcher ? { launcher } : {});
  const { key } = await newAccount(target, '10');
  return { emulator, target, key };
}

beforeAll(async () => {
  emulated = await startSide();
  if (!RIC) return;
  const out = join(REPO_ROOT, '.cache/conformance-bundles');
  const bundles = {
    probe: await bundle('test/conformance/probe-handler.ts', join(out, 'probe')),
    completions: await bundle('functions/completions/handler.ts', join(out, 'completions')),
    models: await bundle('functions/account/handler.ts', join(out, 'models')),
  };
  ric = await startSide(ricLauncher({ ...bundles, 'probe-pool': bundles.probe }));
}, 120_000);

afterAll(async () => {
  for (const side of [emulated, ric]) {
    await side?.emulator.close();
    await side?.target.stop();
  }
  console.info(
    RIC
      ? `conformance: ${compared} probes compared between the emulator and aws-lambda-ric`
      : 'conformance: aws-lambda-ric is not installed (run scripts/install-lambda-runtime.sh): 0 probes compared, emulator side only',
  );
});

interface Seen {
  status: number;
  contentType: string | undefined;
  probeHeader: string | undefined;
  body: string;
  /** False when the response was cut off (no terminating chunk). */
  complete: boolean;
  ms: number;
}

/** One request with node:http, so a cut-off response is seen as such rather than as an error. */
function send(
  url: string,
  init: {
    method?: string;
    headers?: Record<string, string>;
    body?: string;
    abortAfterFirstChunk?: boolean;
  } = {},
): Promise<Seen> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const req = request(url, { method: init.method ?? 'GET', headers: init.headers ?? {} }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => {
        parts.push(d);
        if (init.abortAfterFirstChunk) req.destroy();
      });
      res.on('error', () => {});
      res.on('close', () =>
        resolve({
          status: res.statusCode ?? 0,
          contentType: res.headers['content-type'],
          probeHeader: res.headers['x-probe'] as string | undefined,
          body: Buffer.concat(parts).toString('utf8'),
          complete: res.complete,
          ms: Date.now() - started,
        }),
      );
    });
    req.on('error', (e) => {
      if (!init.abortAfterFirstChunk) reject(e);
    });
    req.end(init.body);
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const stateOf = async (side: Side, prefix = '') =>
  JSON.parse((await send(`${side.emulator.url}${prefix}/state`)).body) as {
    instance: string;
    maxInFlight: number;
    disconnectFinished: boolean;
    remainingNow: number;
    memory: string;
    functionName: string;
  };
const errorsOf = (side: Side) => side.emulator.stats('probe').errors;

/** Runs `probe` on the emulator, checks `expectEmulator`, then requires the RIC to give the same. */
function probe<T>(name: string, run: (side: Side) => Promise<T>, expectEmulator: (seen: T) => void) {
  it(name, async () => {
    const seen = await run(emulated);
    expectEmulator(seen);
    if (!ric) return;
    expect(await run(ric)).toEqual(seen);
    compared += 1;
  }, 30_000);
}

const atDeadline = (ms: number) => ms >= TIMEOUT_MS - 50 && ms < TIMEOUT_MS + 1_000;

describe('the probe function', () => {
  probe(
    'stream: status and headers from the prelude, chunks in order, ended by the handler',
    async (side) => {
      const { ms: _ms, ...seen } = await send(`${side.emulator.url}/stream`);
      return seen;
    },
    (seen) =>
      expect(seen).toEqual({
        status: 200,
        contentType: 'text/plain',
        probeHeader: undefined,
        body: 'chunk 0\nchunk 1\nchunk 2\n',
        complete: true,
      }),
  );

  probe(
    'a status and headers set with HttpResponseStream.from reach the client',
    async (side) => {
      const { ms: _ms, ...seen } = await send(`${side.emulator.url}/status`);
      return seen;
    },
    (seen) =>
      expect(seen).toMatchObject({ status: 418, probeHeader: 'prelude', body: 'teapot', complete: true }),
  );

  probe(
    'a stream written without a prelude is a 200 with the runtime default content type',
    async (side) => {
      const { ms: _ms, ...seen } = await send(`${side.emulator.url}/raw`);
      return seen;
    },
    (seen) =>
      expect(seen).toMatchObject({
        status: 200,
        contentType: 'application/octet-stream',
        body: 'raw bytes',
        complete: true,
      }),
  );

  probe(
    'end(chunk) is not a write: the prelude is not sent, and the bytes are not a valid response',
    async (side) => {
      const { ms: _ms, ...seen } = await send(`${side.emulator.url}/end-with-chunk`);
      return seen;
    },
    (seen) => expect(seen).toMatchObject({ status: 200, probeHeader: undefined, complete: true }),
  );

  probe(
    'HttpResponseStream.from sends nothing by itself: a stream ended without a write carries no prelude',
    async (side) => {
      const { ms: _ms, ...seen } = await send(`${side.emulator.url}/end-without-write`);
      return seen;
    },
    // The prelude goes out with the first write; with none, the status set is never sent.
    (seen) => expect(seen).toMatchObject({ status: 200, probeHeader: undefined, body: '', complete: true }),
  );

  probe(
    'an error thrown before the first write is a 502, counted as a function error',
    async (side) => {
      const before = errorsOf(side);
      const { ms: _ms, ...seen } = await send(`${side.emulator.url}/throw-before`);
      return { ...seen, errors: errorsOf(side) - before };
    },
    (seen) => expect(seen).toMatchObject({ status: 502, complete: true, errors: 1 }),
  );

  probe(
    'an error thrown after the first write cuts the response off and is counted as a function error',
    async (side) => {
      const before = errorsOf(side);
      const { ms: _ms, ...seen } = await send(`${side.emulator.url}/throw-after`);
      return { ...seen, errors: errorsOf(side) - before };
    },
    (seen) => expect(seen).toMatchObject({ status: 200, body: 'partial', complete: false, errors: 1 }),
  );

  probe(
    'a handler that returns without ending the stream is not ended for it: it runs into the deadline',
    async (side) => {
      const before = side.emulator.stats('probe').timeouts;
      // The deadline counts from the invocation, not from an instance's start (Lambda times init
      // apart): an instance is warmed first, since the probe before may have ended its own.
      await stateOf(side);
      const seen = await send(`${side.emulator.url}/early-return`);
      return {
        status: seen.status,
        body: seen.body,
        complete: seen.complete,
        atDeadline: atDeadline(seen.ms),
        timeouts: side.emulator.stats('probe').timeouts - before,
      };
    },
    (seen) =>
      expect(seen).toEqual({ status: 200, body: 'early', complete: false, atDeadline: true, timeouts: 1 }),
  );

  probe(
    'the deadline kills the invocation: the client sees the truncated response at the function timeout',
    async (side) => {
      // A timeout ends its instance, as Lambda's does, so the probe before leaves none warm: one is
      // started first, so that the time measured is the invocation's, not a cold start's too.
      await stateOf(side);
      const seen = await send(`${side.emulator.url}/deadline`);
      return {
        status: seen.status,
        dots: /^\.+$/.test(seen.body),
        complete: seen.complete,
        atDeadline: atDeadline(seen.ms),
      };
    },
    (seen) => expect(seen).toEqual({ status: 200, dots: true, complete: false, atDeadline: true }),
  );

  probe(
    'the context carries the configured memory size, the function name and the true remaining time',
    async (side) => {
      const state = await stateOf(side);
      return {
        memory: state.memory,
        functionName: state.functionName,
        remainingTrue: state.remainingNow > TIMEOUT_MS - 250 && state.remainingNow <= TIMEOUT_MS,
      };
    },
    (seen) => expect(seen).toEqual({ memory: String(MEMORY_MB), functionName: 'probe', remainingTrue: true }),
  );

  probe(
    'a client that disconnects does not stop the function: it runs to its end',
    async (side) => {
      const seen = await send(`${side.emulator.url}/disconnect`, { abortAfterFirstChunk: true });
      await sleep(600);
      return { body: seen.body, complete: seen.complete, finished: (await stateOf(side)).disconnectFinished };
    },
    (seen) => expect(seen).toEqual({ body: 'first', complete: false, finished: true }),
  );

  probe(
    'an uncaught exception ends its invocation (cut off) and its instance; the next request gets a new one',
    async (side) => {
      const before = (await stateOf(side)).instance;
      const errors = errorsOf(side);
      const seen = await send(`${side.emulator.url}/uncaught`);
      const after = await stateOf(side);
      return {
        status: seen.status,
        body: seen.body,
        complete: seen.complete,
        errors: errorsOf(side) - errors,
        newInstance: after.instance !== before,
      };
    },
    (seen) =>
      expect(seen).toEqual({
        status: 200,
        body: 'before the crash',
        complete: false,
        errors: 1,
        newInstance: true,
      }),
  );

  probe(
    'one invocation at a time per instance: concurrent requests get their own instances, up to the limit',
    async (side) => {
      const results = await Promise.all(
        [1, 2, 3].map(async () => JSON.parse((await send(`${side.emulator.url}/pool/sleep`)).body)),
      );
      const instances = new Set(results.map((r: { instance: string }) => r.instance));
      const state = await stateOf(side, '/pool');
      return { instances: instances.size, maxInFlight: state.maxInFlight };
    },
    (seen) => expect(seen).toEqual({ instances: 2, maxInFlight: 1 }),
  );
});

describe("a probe's expected failure", () => {
  it('is kept in the test log, shown only if its test fails: a green run prints no stack trace', async () => {
    const seen = await send(`${emulated.emulator.url}/throw-before`);
    expect(seen.status).toBe(502);
    // The instance's own report (its stack trace) and the Runtime API's line, both kept.
    await vi.waitFor(() => {
      expect(testLog.some((line) => line.includes('Invoke Error Error: thrown before the first write'))).toBe(
        true,
      );
      expect(testLog.some((line) => line.includes('at '))).toBe(true);
      expect(testLog).toContainEqual(expect.stringContaining('[runtime-api] probe: function error'));
    });
  });
});

describe('the service functions', () => {
  const completions = (side: Side, body: unknown, headers: Record<string, string> = {}) =>
    send(`${side.target.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${side.key}`, ...headers },
      body: JSON.stringify(body),
    });
  const ask = (stream: boolean) => ({
    model: 'svc-fast',
    messages: [{ role: 'user', content: 'probe [[sim:tokens=4]]' }],
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
  });

  probe(
    'a streamed completion: SSE chunks, a usage chunk and [DONE], ended cleanly',
    async (side) => {
      const seen = await completions(side, ask(true));
      const data = seen.body
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice(6));
      return {
        status: seen.status,
        contentType: seen.contentType,
        complete: seen.complete,
        chunks: data.length,
        last: data.at(-1),
        usage: data.some((d) => d.includes('"usage":{')),
      };
    },
    (seen) => expect(seen).toMatchObject({ status: 200, complete: true, last: '[DONE]', usage: true }),
  );

  probe(
    'a JSON completion',
    async (side) => {
      const seen = await completions(side, ask(false));
      return {
        status: seen.status,
        contentType: seen.contentType,
        complete: seen.complete,
        keys: Object.keys(JSON.parse(seen.body)).sort(),
      };
    },
    (seen) => expect(seen).toMatchObject({ status: 200, contentType: 'application/json', complete: true }),
  );

  probe(
    'a missing key is a 401 with an OpenAI error body',
    async (side) => {
      const seen = await completions(side, ask(false), { authorization: '' });
      return { status: seen.status, contentType: seen.contentType, error: JSON.parse(seen.body).error?.code };
    },
    (seen) => expect(seen.status).toBe(401),
  );

  probe(
    'a GET on the completions route is a 405',
    async (side) => {
      // With a key: the edge answers a request without one 401 before any function runs.
      const seen = await send(`${side.target.baseUrl}/chat/completions`, {
        headers: { authorization: `Bearer ${side.key}` },
      });
      return { status: seen.status, allow: seen.body.length > 0 };
    },
    (seen) => expect(seen.status).toBe(405),
  );

  probe(
    'the models list: a buffered (not streamed) function result, as the Function URL translates it',
    async (side) => {
      const seen = await send(`${side.target.baseUrl}/models`, {
        headers: { authorization: `Bearer ${side.key}` },
      });
      const body = JSON.parse(seen.body) as { object: string; data: { id: string }[] };
      return { status: seen.status, object: body.object, ids: body.data.map((m) => m.id).sort() };
    },
    (seen) => expect(seen).toMatchObject({ status: 200, object: 'list' }),
  );

  probe(
    'a request to the bare Function URL (no origin-verify header from CloudFront) is a 403',
    async (side) => {
      const url = side.target.local?.emulator.functionUrls.completions;
      const seen = await send(`${url}/api/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${side.key}` },
        body: JSON.stringify(ask(false)),
      });
      return { status: seen.status, complete: seen.complete };
    },
    (seen) => expect(seen).toEqual({ status: 403, complete: true }),
  );
});

describe('aws-lambda-ric', () => {
  it.runIf(IN_CI)('is installed in CI', () => {
    expect(
      RIC,
      'CI=true but aws-lambda-ric is not installed: run scripts/install-lambda-runtime.sh',
    ).toBeTruthy();
  });
  it.skipIf(!RIC)('was compared on every probe', () => {
    // 13 probe-function probes and 6 service-function probes, each compared above.
    expect(compared).toBe(19);
  });
});
