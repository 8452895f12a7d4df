import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { build } from 'esbuild';
import { DynamoStore } from '../functions/adapters/dynamodb/index.js';
import { createAccount, createKey } from '../lib/admin/operations.js';
import { ensureTables, freePort, localClient, startDynamoLocal } from '../lib/local/dynamodb-local.js';
import { localTableNames } from '../lib/local/stack.js';

/**
 * `npm run bench`: what the gateway adds on top of the model (issue: lean and measured).
 * Starts its own DynamoDB Local (in memory), the simulator and the gateway in separate processes on
 * free ports, then measures with autocannon against the simulator directly and through the
 * gateway: added latency (p50, p99), added time to first byte, requests per second, and the
 * gateway process's CPU per request; then bundle sizes and import times. Prints a table and
 * writes it to bench/results/.
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

async function bundleFacts(): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-bundle-'));
  const rows: string[] = [];
  const importTimes = (script: string) => {
    const times: number[] = [];
    for (let i = 0; i < 15; i++) {
      const started = performance.now();
      const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
        env: {
          ...process.env,
          UPSTREAM_BASE_URL: 'http://127.0.0.1:9/v1',
          AWS_REGION: 'eu-west-1',
          AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      if (run.status !== 0) throw new Error(`import failed: ${run.stderr.toString()}`);
      times.push(performance.now() - started);
    }
    return times.sort((a, b) => a - b)[7] ?? NaN;
  };
  const bare = importTimes('0');
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
  rows.push(`| bare \`node -e 0\` | - | ${ms(bare)} | - |`);
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
    const size = statSync(outfile).size;
    const script = `globalThis.awslambda={streamifyResponse:(f)=>f,HttpResponseStream:{from:(s)=>s}};await import(${JSON.stringify(outfile)});`;
    const time = importTimes(script);
    rows.push(`| ${name} | ${(size / 1024).toFixed(0)} KiB | ${ms(time)} | ${ms(time - bare)} |`);
  }
  const tokenizerTime = importTimes(`await import(${JSON.stringify(tokenizer)});`);
  rows.push(
    `| tokenizer (loaded only to estimate usage) | ${(statSync(tokenizer).size / 1024).toFixed(0)} KiB | ${ms(tokenizerTime)} | ${ms(tokenizerTime - bare)} |`,
  );
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
    ['bin/local.ts'],
    {
      PORT: String(gatewayPort),
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

  say('');
  say(
    '| bundle (esbuild, minified ESM) | size | import ms (median of 15 fresh processes) | minus bare node |',
  );
  say('|---|---|---|---|');
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
