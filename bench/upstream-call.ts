/**
 * `npx tsx bench/upstream-call.ts`: the CPU of one JSON upstream call, two ways, on Node 22 when
 * scripts/install-lambda-runtime.sh has installed it: through the upstream adapter as the completions
 * function calls it (`openWithFallback` over the HTTP/1.1 exchange, functions/adapters/http1.ts, the
 * body read whole), and through node:http with a keep-alive agent (how the adapter called upstreams
 * until 2026-11-26: a request with its headers object, the body read from the IncomingMessage).
 * The upstream is the simulator in another process (its CPU is not counted). Calls are 5 ms apart (an
 * instance between invocations, its caches cooling), the ways take turns in each of 5 rounds of 200
 * calls; prints this process's CPU per call (process.cpuUsage), median and range over the rounds.
 */
import { spawn } from 'node:child_process';
import { Agent, request } from 'node:http';
import { openWithFallback, readBody } from '../functions/adapters/upstream.js';
import type { UpstreamTarget } from '../functions/core/tiers.js';
import { runOnNode22 } from './on-node22.js';

runOnNode22();

const ROUNDS = 5;
const CALLS = 200;
const GAP_MS = 5;

const simulator = spawn(process.execPath, ['--import', 'tsx', 'bench/simulator.ts'], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
const baseUrl = await new Promise<string>((resolve) =>
  simulator.stdout.on('data', (line: Buffer) => {
    const url = /SIMULATOR (\S+)/.exec(line.toString())?.[1];
    if (url) resolve(url);
  }),
);
const url = new URL(`${baseUrl}/chat/completions`);
const body = { model: 'sim-fast', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 16 };

async function viaAdapter(): Promise<string> {
  const opened = await openWithFallback({
    targets: [{ baseUrl, model: 'sim-fast' } as UpstreamTarget],
    bodyFor: () => body,
    credential: async () => 'sk-bench',
    policy: { attemptsPerTarget: 1, baseDelayMs: 1, maxDelayMs: 1, firstByteTimeoutMs: 5_000 },
    maxBytes: 1_000_000,
    deadline: Date.now() + 10_000,
  });
  if (opened.stream) throw new Error('a JSON call answered a stream');
  return readBody(opened.body);
}

const agent = new Agent({ keepAlive: true, maxSockets: 256 });
function viaNodeHttp(): Promise<string> {
  const json = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        protocol: url.protocol,
        hostname: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          authorization: 'Bearer sk-bench',
          'content-length': String(Buffer.byteLength(json)),
        },
      },
      (response) => {
        const parts: Buffer[] = [];
        response.on('data', (part: Buffer) => parts.push(part));
        response.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
        response.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(json);
  });
}

async function paced(call: () => Promise<string>): Promise<number> {
  let cpu = 0;
  for (let i = 0; i < CALLS; i++) {
    await new Promise((resolve) => setTimeout(resolve, GAP_MS));
    const start = process.cpuUsage();
    const reply = await call();
    const used = process.cpuUsage(start);
    if (!reply.includes('"chat.completion"')) throw new Error(`not a completion: ${reply.slice(0, 80)}`);
    cpu += used.user + used.system;
  }
  return cpu / CALLS;
}

const ways = { 'the adapter (http1.ts)': viaAdapter, 'node:http, keep-alive agent': viaNodeHttp };
const results: Record<string, number[]> = Object.fromEntries(Object.keys(ways).map((name) => [name, []]));
for (const way of Object.values(ways)) for (let i = 0; i < 20; i++) await way(); // warm-up
for (let round = 0; round < ROUNDS; round++)
  for (const [name, way] of Object.entries(ways)) results[name]?.push(await paced(way));
simulator.kill();
agent.destroy();

console.log(
  `node ${process.version}; ${ROUNDS} rounds of ${CALLS} JSON calls ${GAP_MS} ms apart per way, in turn`,
);
console.log('| way | us of CPU per call, median | range |');
console.log('|---|---|---|');
for (const [name, runs] of Object.entries(results)) {
  const sorted = [...runs].sort((a, b) => a - b);
  console.log(
    `| ${name} | ${(sorted[Math.floor(sorted.length / 2)] ?? 0).toFixed(0)} | ${(sorted[0] ?? 0).toFixed(0)}-${(sorted.at(-1) ?? 0).toFixed(0)} |`,
  );
}
