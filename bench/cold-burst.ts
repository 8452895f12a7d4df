/**
 * A cold burst: `BENCH_BURST` (default 100) concurrent streamed completions into the
 * completions function with no warm instance, each instance a Node 22 process under AWS's runtime
 * client (aws-lambda-ric) on the bundle as the stack builds it, held to a memory size's CPU share
 * (default 160 MB, bench/cpu-limit.ts) from the moment it is spawned, so its init is held too. Time to
 * first byte, p50 and p99, against the same burst into the instances the cold burst left warm and
 * against the upstream called directly; and the CPU each cold instance spent on its init and first
 * request (its process's own schedstat), the figure that carries over to Lambda, where every
 * instance has its own share of a CPU.
 *
 * Loopback only, bounded: one burst of each kind, an upstream in this process that answers at once
 * (one chunk, its usage, [DONE]), DynamoDB Local as the caller gives it. This process and what it
 * starts in-process (the emulator, the IAM layer, the upstream) run on core 0; every instance on
 * core 1, in its own cgroup. On a machine of 2 cores the instances share that one core: a burst's
 * times here are bounded by the sum of their cold starts' CPU, not by one instance's.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { Agent, createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { createAccount, createKey } from '../lib/admin/operations.js';
import { FUNCTION_NODE_OPTIONS, FUNCTION_PROCESS_ENV, REPO_ROOT } from '../lib/infra/service-function.js';
import { bundleFunctions, lambdaNodeFlags, NODE22 } from '../lib/local/aws-lambda-ric.js';
import type { EmulatedFunction } from '../lib/local/emulator.js';
import type { Launcher } from '../lib/local/runtime-api.js';
import { startLocalStack } from '../lib/local/stack.js';
import { available as cgroupAvailable, cpuShare, PERIOD_US, pinToCore } from './cpu-limit.js';
import { processCpuMs } from './process-cpu.js';

const CGROUP_ROOT = '/sys/fs/cgroup/cpu';
const RIC = join(
  resolve(REPO_ROOT, process.env.LAMBDA_RUNTIME_DIR ?? '.cache/lambda-runtime'),
  'ric/node_modules/aws-lambda-ric/index.mjs',
);

/** An upstream that answers a stream at once: one chunk, its usage, [DONE] (no tokenizer, no pacing). */
async function promptUpstream(): Promise<{ url: string; server: Server }> {
  const envelope = { id: 'chatcmpl-burst', object: 'chat.completion.chunk', created: 1, model: 'burst' };
  const reply =
    `data: ${JSON.stringify({ ...envelope, choices: [{ index: 0, delta: { role: 'assistant', content: 'hello' }, logprobs: null, finish_reason: 'stop' }] })}\n\n` +
    `data: ${JSON.stringify({ ...envelope, choices: [], usage: { prompt_tokens: 12, completion_tokens: 1, total_tokens: 13 } })}\n\n` +
    'data: [DONE]\n\n';
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(reply);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/** A cgroup (v1 `cpu`) of its own for one instance, its CFS quota `memoryMb`'s share of each period. */
function instanceCgroup(name: string, memoryMb: number): { procs: string; release(): void } {
  const dir = join(CGROUP_ROOT, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'cpu.cfs_period_us'), String(PERIOD_US));
  const share = cpuShare(memoryMb);
  writeFileSync(join(dir, 'cpu.cfs_quota_us'), share >= 1 ? '-1' : String(Math.round(share * PERIOD_US)));
  return {
    procs: join(dir, 'cgroup.procs'),
    release() {
      try {
        rmdirSync(dir);
      } catch {
        // a process still in it: left for the OS
      }
    },
  };
}

/**
 * Instances as ricLauncher (lib/local/aws-lambda-ric.ts) starts them, except that each completions
 * instance enters a cgroup of its own, held to its memory size's share, and core 1 before Node runs
 * (a shell that writes its own pid into the cgroup, then execs taskset and Node): its whole init is
 * held, and starting it does not block this process (the emulator) on a taskset of its own.
 */
export function limitedLauncher(
  bundles: Record<string, string>,
  limited: boolean,
  started: { pid: number; release: () => void }[],
) {
  return (fn: EmulatedFunction): Launcher =>
    (runtimeApi, env) => {
      const dir = bundles[fn.name];
      if (!dir) throw new Error(`no bundle for ${fn.name}`);
      const node = [NODE22, ...lambdaNodeFlags(fn.memoryMb), RIC, 'index.handler'];
      const held = limited && fn.name === 'completions';
      const group = held
        ? instanceCgroup(`bench-burst-${process.pid}-${started.length}`, fn.memoryMb)
        : undefined;
      const [command, ...args] = group
        ? ['sh', '-c', `echo $$ > "${group.procs}" && exec taskset -c 1 "$@"`, 'sh', ...node]
        : node;
      const child: ChildProcess = spawn(command as string, args, {
        cwd: dir,
        env: {
          ...env,
          NODE_OPTIONS: FUNCTION_NODE_OPTIONS,
          ...FUNCTION_PROCESS_ENV,
          AWS_LAMBDA_RUNTIME_API: runtimeApi,
          LAMBDA_TASK_ROOT: dir,
          _HANDLER: 'index.handler',
          AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
        },
        stdio: ['ignore', 'ignore', 'ignore'],
      });
      const pid = child.pid ?? 0;
      if (fn.name === 'completions') started.push({ pid, release: () => group?.release() });
      const exited = new Promise((done) => child.once('exit', done));
      return { exited, kill: () => void child.kill('SIGKILL') };
    };
}

interface BurstResult {
  ttfb: number[];
  total: number[];
  statuses: number[];
}

/** `n` streamed completions at once, each on its own connection: time to first body byte and to the end. */
async function burst(url: string, headers: Record<string, string>, n: number): Promise<BurstResult> {
  const agent = new Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  const body = JSON.stringify({
    model: 'svc-fast',
    messages: [{ role: 'user', content: 'Say hello.' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  const one = () =>
    new Promise<{ ttfb: number; total: number; status: number }>((done, fail) => {
      const started = performance.now();
      let ttfb = Number.NaN;
      const req = request(
        url,
        {
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'accept-encoding': 'gzip, deflate', ...headers },
        },
        (res) => {
          res.on('data', () => {
            if (Number.isNaN(ttfb)) ttfb = performance.now() - started;
          });
          res.on('end', () =>
            done({ ttfb, total: performance.now() - started, status: res.statusCode ?? 0 }),
          );
          res.on('error', fail);
        },
      );
      req.on('error', fail);
      req.end(body);
    });
  const results = await Promise.all(Array.from({ length: n }, one));
  agent.destroy();
  const sorted = (values: number[]) => values.sort((a, b) => a - b);
  return {
    ttfb: sorted(results.map((r) => r.ttfb)),
    total: sorted(results.map((r) => r.total)),
    statuses: results.map((r) => r.status),
  };
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((sorted.length * p) / 100) - 1)] ?? Number.NaN;

export interface ColdBurstFigures {
  cold: BurstResult;
  warm: BurstResult;
  direct: BurstResult;
  /** CPU ms of each cold instance from its spawn to the end of the cold burst (init and first request). */
  instanceCpuMs: number[];
  instances: number;
  limited: boolean;
}

export async function coldBurst(
  say: (line?: string) => void,
  dynamoEndpoint: string,
  options: { burst?: number; memoryMb?: number } = {},
): Promise<ColdBurstFigures> {
  const n = options.burst ?? Number(process.env.BENCH_BURST ?? 100);
  const memoryMb = options.memoryMb ?? 160;
  const limited = cgroupAvailable();
  if (limited) pinToCore(process.pid, 0);
  const upstream = await promptUpstream();
  const bundles = await bundleFunctions('.cache/burst-bundles');
  const started: { pid: number; release: () => void }[] = [];
  const stack = await startLocalStack({
    dynamoEndpoint,
    tablePrefix: 'burst-',
    upstreamBaseUrl: `${upstream.url}/v1`,
    launcher: limitedLauncher(bundles, limited, started),
    functions: { completions: { maxInstances: n, warmInstances: 0, memoryMb } },
    env: { LOG_LEVEL: 'SILENT', POWERTOOLS_METRICS_DISABLED: 'true' },
  });
  let figures: ColdBurstFigures;
  try {
    await createAccount({ store: stack.store }, 'burst', '100000');
    const { key } = await createKey({ store: stack.store }, 'burst', 'burst');
    const url = `${stack.baseUrl}/chat/completions`;
    const auth = { authorization: `Bearer ${key}` };
    // The upstream, warmed, then called directly: the floor of a burst's time to first byte.
    await burst(`${upstream.url}/v1/chat/completions`, {}, n);
    const cold = await burst(url, auth, n);
    const instanceCpuMs = started
      .map(({ pid }) => {
        try {
          return processCpuMs(pid);
        } catch {
          return Number.NaN;
        }
      })
      .sort((a, b) => a - b);
    // The instances the cold burst left: the first warm burst still meets some JIT; the second is read.
    await burst(url, auth, n);
    const warm = await burst(url, auth, n);
    const direct = await burst(`${upstream.url}/v1/chat/completions`, {}, n);
    figures = { cold, warm, direct, instanceCpuMs, instances: started.length, limited };
  } finally {
    await stack.stop();
    upstream.server.close();
    // The instances are gone (killed by the emulator's stop): their cgroups can go.
    await new Promise((done) => setTimeout(done, 500));
    for (const { release } of started) release();
  }
  sayColdBurst(say, figures, n, memoryMb);
  return figures;
}

function sayColdBurst(say: (line?: string) => void, f: ColdBurstFigures, n: number, memoryMb: number) {
  const share = cpuShare(memoryMb);
  const fails = (r: BurstResult) => r.statuses.filter((s) => s !== 200).length;
  const row = (label: string, r: BurstResult) =>
    `| ${label} | ${n} | ${percentile(r.ttfb, 50).toFixed(0)} | ${percentile(r.ttfb, 99).toFixed(0)} | ${percentile(r.total, 50).toFixed(0)} | ${percentile(r.total, 99).toFixed(0)} | ${fails(r)} |`;
  const cpu50 = percentile(f.instanceCpuMs, 50);
  const cpu99 = percentile(f.instanceCpuMs, 99);
  say('');
  say(`## A cold burst: ${n} concurrent streamed completions, no warm instance, ${memoryMb} MB's CPU share`);
  say('');
  say(
    `Each completions instance a Node 22 process under aws-lambda-ric on the bundle as built for the stack, ${f.limited ? `held from its exec to ${(share * 100).toFixed(1)}% of a vCPU (a CFS quota of its own cgroup) and pinned to core 1; this process, the emulator and the upstream on core 0` : 'NOT CPU-limited (no write access to /sys/fs/cgroup/cpu here)'}. ` +
      'Time to first byte (first body byte at the client) and to the end of the stream, ms; the same burst into the instances the cold one left (the second burst after it), and directly into the upstream (in-process, answering at once). ' +
      `${f.instances} instances were started.`,
  );
  say('');
  say('| burst | requests | TTFB p50 ms | TTFB p99 ms | total p50 ms | total p99 ms | non-200 |');
  say('|---|---|---|---|---|---|---|');
  say(row('cold (no instance)', f.cold));
  say(row('warm (the instances it left)', f.warm));
  say(row('direct to the upstream', f.direct));
  say('');
  say(
    `CPU of one cold instance, spawn to the end of its first request (runtime client, init, the request): p50 ${cpu50.toFixed(0)} ms, p99 ${cpu99.toFixed(0)} ms. ` +
      `At ${(share * 100).toFixed(1)}% of a vCPU that CPU alone is ${(cpu50 / share / 1000).toFixed(2)} s of wall time (p50): on Lambda, where each instance has its own share, a cold request's wait is about that plus its warm time to first byte; here the ${f.instances} instances share one core, so the burst's p99 is near their summed CPU.`,
  );
}
