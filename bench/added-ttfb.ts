/**
 * `BENCH_ONLY=ttfb npm run bench` (or `npx tsx bench/added-ttfb.ts`): what a customer waits for, the
 * service's time to first byte minus the same request's sent straight to the upstream simulator
 * (issue 65), by memory size, with Portkey beside it.
 *
 * - Each completions instance (its bundle under aws-lambda-ric on Node 22) is held from its exec to
 *   its memory size's CPU share, a CFS quota of its own cgroup, on core 1 (cold-burst.ts's launcher);
 *   this process and what it starts (the emulator, the simulator, DynamoDB Local) run on core 0.
 * - DynamoDB as AWS answers it in-region: dynamo-latency.ts in front of DynamoDB Local.
 * - Warm, at 1 client (requests back to back, an upstream answering at once) and at 20 (each client's
 *   requests back to back, an upstream taking WAIT_MS to its first byte, so that 20 instances wait as they would on a
 *   model instead of queueing on this machine's one core for them); a JSON reply's first byte and a
 *   stream's first content chunk; a funded account (no hold), a near-empty one (a hold) and a key with
 *   a daily cap (KEY_DAILY_CAPS=on: always held, on the key's counter).
 * - A cold request's added time: the first request of a fresh stack (a funded stream at 1 client).
 * - The function's own time before the upstream call and after it, from the `server-timing` header
 *   its instances send with SERVER_TIMING=on (functions/shared/server-timing.ts).
 * - The typical request's cost at each size as a share of its margin (cost.ts): a svc-fast stream of
 *   ~500 prompt tokens, its first token after 500 ms, 300 tokens 12.5 ms apart, measured end to end.
 * - Portkey (portkey.ts, on Node 22) in one process held to the same share (times the clients: at 20
 *   it gets what 20 instances get, at most the core), in front of the same simulator.
 *
 * Interleaved rounds: each round starts a stack per size (sizes in rotating order) and, request by
 * request at 1 client and by turns at 20, sends direct, through the service and through Portkey in
 * turn. Figures are medians over rounds with the range. Env: BENCH_TTFB_MB (sizes, default
 * 128,160,192,224,256,512,1024), BENCH_TTFB_FULL_MB (the size measured for every account, default
 * the deployed one, FUNCTION_SETTINGS.completions),
 * BENCH_TTFB_ROUNDS (3), BENCH_TTFB_SAMPLES (40 at 1 client), BENCH_TTFB_PORTKEY=off,
 * BENCH_TTFB_COST=off.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createAccount, createKey } from '../lib/admin/operations.js';
import { FUNCTION_SETTINGS } from '../lib/infra/function-settings.js';
import { bundleFunctions, runtimeInstalled } from '../lib/local/aws-lambda-ric.js';
import { freePort, startDynamoLocal } from '../lib/local/dynamodb-local.js';
import { startLocalStack } from '../lib/local/stack.js';
import { limitedLauncher } from './cold-burst.js';
import { percent, requestCost, usd } from './cost.js';
import { available as cgroupAvailable, cpuShare, limitCpu, pinToCore } from './cpu-limit.js';
import { DYNAMO_LATENCY, startDynamoLatency } from './dynamo-latency.js';
import { startPortkey } from './portkey.js';
import { startService, stopService } from './service-process.js';
import {
  type CellRound,
  chat,
  closeClient,
  roundOf,
  type Sample,
  type System,
  spread,
  timed,
} from './ttfb-samples.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const list = (raw: string) => raw.split(',').map(Number);
const SIZES = list(process.env.BENCH_TTFB_MB ?? '128,160,192,224,256,512,1024');
const FULL_MB = Number(process.env.BENCH_TTFB_FULL_MB ?? FUNCTION_SETTINGS.completions.memoryMb);
const ROUNDS = Number(process.env.BENCH_TTFB_ROUNDS ?? 3);
const SAMPLES = Number(process.env.BENCH_TTFB_SAMPLES ?? 40);
const CLIENTS = [1, 20] as const;
/** At 20 clients, each client's requests a cell a system a round. */
const PER_CLIENT = 4;
const WAIT_MS = 250;
const PORTKEY = process.env.BENCH_TTFB_PORTKEY !== 'off';
const COST = process.env.BENCH_TTFB_COST !== 'off';
const ACCOUNTS = ['funded', 'near-empty', 'capped'] as const;
type Account = (typeof ACCOUNTS)[number];

const cells = new Map<string, CellRound[]>();
const colds = new Map<number, number[]>();
const costs = new Map<number, { share: number[]; durationMs: number[]; infra: bigint; margin: bigint }>();
const cellKey = (mb: number, stream: boolean, account: Account, clients: number) =>
  `${mb}|${stream ? 'stream' : 'json'}|${account}|${clients}`;

async function measureCell(
  urls: Record<System, string | undefined>,
  headers: Record<System, Record<string, string>>,
  stream: boolean,
  clients: number,
): Promise<Record<System, Sample[]>> {
  const out: Record<System, Sample[]> = { direct: [], service: [], portkey: [] };
  const systems = (Object.keys(urls) as System[]).filter((s) => urls[s]);
  const body = chat(stream, clients === 1 ? '' : ` [[sim:first_byte_delay_ms=${WAIT_MS}]]`);
  if (clients === 1) {
    for (let i = 0; i < SAMPLES; i++)
      for (const system of systems)
        out[system].push(await timed(urls[system] as string, body, headers[system]));
    return out;
  }
  // 20 clients, each sending its next request as soon as it has the last one's reply (their arrivals
  // drift apart, as a service's do), PER_CLIENT requests each; the systems in turn, twice.
  for (let turn = 0; turn < 2; turn++)
    for (const system of systems) {
      const url = urls[system] as string;
      await Promise.all(
        Array.from({ length: clients }, async () => {
          for (let i = 0; i < PER_CLIENT / 2; i++) out[system].push(await timed(url, body, headers[system]));
        }),
      );
    }
  return out;
}

function record(key: string, samples: Record<System, Sample[]>) {
  cells.set(key, [...(cells.get(key) ?? []), roundOf(samples)]);
}

let bundles: Record<string, string> | undefined;

async function oneSize(mb: number, env: { dynamo: string; simUrl: string; portkey?: PortkeyRun }) {
  bundles ??= await bundleFunctions('.cache/ttfb-bundles');
  const started: { pid: number; release: () => void }[] = [];
  const stack = await startLocalStack({
    dynamoEndpoint: env.dynamo,
    tablePrefix: `ttfb${mb}-${Date.now()}-`,
    upstreamBaseUrl: env.simUrl,
    launcher: limitedLauncher(bundles, true, started),
    functions: { completions: { maxInstances: 22, warmInstances: 0, memoryMb: mb } },
    env: {
      LOG_LEVEL: 'SILENT',
      POWERTOOLS_METRICS_DISABLED: 'true',
      SERVER_TIMING: 'on',
      KEY_DAILY_CAPS: 'on',
    },
  });
  try {
    const admin = { store: stack.store, keyDailyCaps: true };
    await createAccount(admin, 'funded', '1000');
    await createAccount(admin, 'near-empty', '1');
    const keys: Record<Account, string> = {
      funded: (await createKey(admin, 'funded', 'bench')).key,
      'near-empty': (await createKey(admin, 'near-empty', 'bench')).key,
      capped: (await createKey(admin, 'funded', 'capped', { dailyCapUsd: '100' })).key,
    };
    const url = `${stack.baseUrl}/chat/completions`;
    const direct = `${env.simUrl}/chat/completions`;
    // The cold request: the stack's first, against the upstream's own in the same moment.
    const coldBody = chat(true, '');
    const cold = await timed(url, coldBody, { authorization: `Bearer ${keys.funded}` });
    const coldDirect = await timed(direct, coldBody, {});
    if (cold.status === 200) colds.set(mb, [...(colds.get(mb) ?? []), cold.ttfb - coldDirect.ttfb]);
    // Warm 22 instances, twice (the first requests of an instance still meet its JIT).
    for (let i = 0; i < 2; i++)
      for (const stream of [false, true])
        await Promise.all(
          Array.from({ length: 20 }, () =>
            timed(url, chat(stream, ` [[sim:first_byte_delay_ms=${WAIT_MS}]]`), {
              authorization: `Bearer ${keys.funded}`,
            }),
          ),
        );
    env.portkey?.limit(mb);
    for (const clients of CLIENTS)
      for (const stream of [false, true])
        for (const account of mb === FULL_MB ? ACCOUNTS : (['funded'] as const)) {
          env.portkey?.limit(mb * clients);
          const samples = await measureCell(
            { direct, service: url, portkey: account === 'funded' ? env.portkey?.url : undefined },
            {
              direct: {},
              service: { authorization: `Bearer ${keys[account]}` },
              portkey: env.portkey?.headers ?? {},
            },
            stream,
            clients,
          );
          record(cellKey(mb, stream, account, clients), samples);
        }
    if (COST) await typicalCost(mb, url, keys.funded);
  } finally {
    await stack.stop();
    await new Promise((done) => setTimeout(done, 300));
    for (const { release } of started) release();
  }
}

/** The typical request, 4 at once, end to end; its cost at this size (2 RRU, 4 WRU: docs/cost.md). */
async function typicalCost(mb: number, url: string, key: string) {
  const prompt = Array.from(
    { length: 490 },
    (_, i) => ['alpha', 'beta', 'gamma', 'delta', 'omega'][i % 5],
  ).join(' ');
  const body = JSON.stringify({
    model: 'svc-fast',
    messages: [
      {
        role: 'user',
        content: `${prompt} [[sim:tokens=300]] [[sim:first_byte_delay_ms=500]] [[sim:delay_ms=13]]`,
      },
    ],
    stream: true,
    stream_options: { include_usage: true },
  });
  const runs = await Promise.all(
    Array.from({ length: 4 }, () => timed(url, body, { authorization: `Bearer ${key}` })),
  );
  const fine = runs.filter((r) => r.status === 200);
  const first = fine[0];
  if (!first) return;
  const durationMs = fine.reduce((sum, r) => sum + r.total, 0) / fine.length;
  const c = requestCost(
    {
      durationMs,
      readUnits: 2,
      writeUnits: 4,
      bytesOut: Math.round(fine.reduce((sum, r) => sum + r.bytes, 0) / fine.length) + 300,
      promptTokens: first.promptTokens,
      completionTokens: first.completionTokens,
    },
    'svc-fast',
    mb,
  );
  const entry = costs.get(mb) ?? { share: [], durationMs: [], infra: c.infra, margin: c.margin };
  entry.share.push(Number((c.infra * 100000n) / c.margin) / 1000);
  entry.durationMs.push(durationMs);
  entry.infra = c.infra;
  entry.margin = c.margin;
  costs.set(mb, entry);
}

interface PortkeyRun {
  url: string;
  headers: Record<string, string>;
  limit(mb: number): void;
  stop(): void;
}

async function portkeyRun(simUrl: string): Promise<PortkeyRun | undefined> {
  if (!PORTKEY) return undefined;
  try {
    const port = await freePort();
    const { child, url } = await startPortkey(port);
    const limit = limitCpu(child.pid ?? 0, 1);
    return {
      url: `${url}/v1/chat/completions`,
      headers: {
        'x-portkey-provider': 'openai',
        'x-portkey-custom-host': simUrl,
        authorization: 'Bearer sim',
      },
      limit: (mb) => limit.set(mb),
      stop: () => {
        limit.release();
        child.kill('SIGTERM');
      },
    };
  } catch (error) {
    portkeyMissing = error instanceof Error ? error.message : String(error);
    return undefined;
  }
}
let portkeyMissing = '';

function report(load: string[]): string[] {
  const lines: string[] = [];
  const say = (line = '') => lines.push(line);
  const { read, write } = DYNAMO_LATENCY;
  say(`# Added time to first byte (${new Date().toISOString()})`);
  say('');
  say(
    `Rounds: ${ROUNDS}; at 1 client ${SAMPLES} requests a cell a system a round, at 20 clients ${PER_CLIENT} requests each, back to back (upstream first byte after ${WAIT_MS} ms). ` +
      `DynamoDB latency injected: reads p50 ${read.p50} ms p99 ${read.p99} ms, writes p50 ${write.p50} ms p99 ${write.p99} ms (log-normal). ` +
      `Load (uptime) at each round's start: ${load.join('; ')}.`,
  );
  say('');
  say(
    'Added ms = the service (or Portkey) minus direct to the simulator, medians over rounds (range). pre/post: the function between handler entry and the upstream call, and between the upstream first event (JSON: its headers) and the reply handed to the runtime (server-timing); pre CPU: the CPU ms of pre; CPU between: the CPU ms between the last reply handed over and this invocation (the last settlement, the runtime client).',
  );
  say('');
  say(
    '| MB | reply | account | clients | added p50 | added p99 | pre p50 | pre p99 | post p50 | post p99 | pre CPU p50 | CPU between p50 | Portkey added p50 | Portkey added p99 | errors |',
  );
  say('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const [key, rounds] of cells) {
    const [mb, kind, account, clients] = key.split('|');
    const col = (pick: (r: CellRound) => number | undefined) => {
      const values = rounds.map(pick).filter((v): v is number => v !== undefined && !Number.isNaN(v));
      return values.length
        ? spread(values)
        : account === 'funded'
          ? portkeyMissing
            ? `n/a: ${portkeyMissing}`
            : '-'
          : '-';
    };
    say(
      `| ${mb} | ${kind} | ${account} | ${clients} | ${col((r) => r.added50)} | ${col((r) => r.added99)} | ${col((r) => r.pre50)} | ${col((r) => r.pre99)} | ${col((r) => r.post50)} | ${col((r) => r.post99)} | ${col((r) => r.preCpu50)} | ${col((r) => r.betweenCpu50)} | ${col((r) => r.portkey50)} | ${col((r) => r.portkey99)} | ${rounds.reduce((n, r) => n + r.errors, 0)} |`,
    );
  }
  say('');
  say(
    '| MB | CPU share | cold request added ms (first of a fresh stack, stream) | typical request wall s | infra | margin | infra / margin |',
  );
  say('|---|---|---|---|---|---|---|');
  for (const mb of SIZES) {
    const c = costs.get(mb);
    say(
      `| ${mb} | ${cpuShare(mb).toFixed(3)} | ${colds.get(mb)?.length ? spread(colds.get(mb) ?? []) : '-'} | ${c ? spread(c.durationMs.map((d) => d / 1000)) : '-'} | ${c ? usd(c.infra) : '-'} | ${c ? usd(c.margin) : '-'} | ${c ? `${spread(c.share)}% (${percent(c.infra, c.margin)} last)` : '-'} |`,
    );
  }
  return lines;
}

async function main() {
  if (!runtimeInstalled()) throw new Error('run scripts/install-lambda-runtime.sh first');
  if (!cgroupAvailable()) throw new Error('needs write access to /sys/fs/cgroup/cpu and taskset');
  pinToCore(process.pid, 0);
  const engine = await startDynamoLocal();
  const latency = await startDynamoLatency(engine.endpoint);
  const sim = await startService(['bench/simulator.ts'], /SIMULATOR (\S+)/);
  const simUrl = sim.match[1] as string;
  const portkey = await portkeyRun(simUrl);
  const load: string[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      // What `uptime` prints as the load average: the 1, 5 and 15 minute figures.
      load.push(`load average: ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(', ')}`);
      const order = SIZES.map((_, i) => SIZES[(i + round) % SIZES.length] as number);
      for (const mb of order) {
        console.error(`round ${round + 1}/${ROUNDS}: ${mb} MB`);
        await oneSize(mb, { dynamo: latency.endpoint, simUrl, ...(portkey ? { portkey } : {}) });
      }
    }
  } finally {
    portkey?.stop();
    await stopService(sim.child);
    await latency.stop();
    await engine.stop();
    closeClient();
  }
  const lines = report(load);
  console.log(lines.join('\n'));
  mkdirSync('bench/results', { recursive: true });
  const file = `bench/results/added-ttfb-${new Date().toISOString().slice(0, 16).replace(':', '')}.md`;
  writeFileSync(file, `${lines.join('\n')}\n`);
  console.error(`written to ${file}`);
}

await main();
