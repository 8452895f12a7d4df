/**
 * The completions function's CPU per request, one checkout against another in the same run: whether a
 * change to the request path moved it, and by how much. The side by side (`BENCH_ONLY=cpu`) compares two
 * commits only through Portkey, in separate runs, and its ratios range ±20% within one run on this
 * machine; here the checkouts serve at once, against one DynamoDB Local and one simulator.
 *
 * Each checkout runs its own `npm start` (bin/local.ts, LOCAL_RUNTIME=aws-lambda-ric: the bundles as the
 * stack builds them, each instance a Node 22 process under AWS's runtime client at 160 MB's heap flags),
 * with its own account and key (no daily cap); `floor` in place of a checkout is this checkout's floor
 * with billing (bench/bare-proxy/billed-json.ts, billed-stream.ts), `floor@<checkout>` another's
 * (bench/ab-floor.ts). The CPU of the instances serving a request is read from /proc (every thread's
 * schedstat, nanoseconds) before and after it. The bodies are the side by side's: a ~500-word prompt,
 * 16 tokens, gzip accepted.
 *
 * Three things this machine does that the design answers (each measured while building it):
 * - CPU time a request drifts by up to 2x within a minute, on every process alike (a virtual machine's
 *   neighbours): the checkouts take turns request by request, so a drift falls on all of them alike.
 * - A process that serves two requests in a row reads about 5% less than one that never does (its code
 *   and data still in the CPU's caches): the turns rotate, so no checkout ever serves two in a row.
 * - Two instances of one bundle, warmed alike, differ by a few per cent for as long as they live (what
 *   the JIT made of their history): each round starts every checkout afresh, so a round is one sample,
 *   and the ratios are given as the rounds' mean with its 95% interval.
 * A per-request figure has a long tail (p90 about 1.6x the median: a collection, a compilation), so
 * each round's median and mean are both reported. As a check of the instrument, a checkout with a
 * 1 ms busy loop added to the handler read +0.87 ms (JSON) and +1.01 ms (stream) in one round.
 *
 * `npx tsx bench/ab-cpu.ts <baseline> [<checkout>|floor|floor@<checkout> ...]`: the first is the baseline (e.g. a worktree
 * of an older commit, `git worktree add --detach /work/wt/before 02d13f9` with node_modules linked in);
 * with one, this checkout is compared with it. `<checkout>+cap` serves a key with a daily cap (never
 * reached), to read what a capped key's request costs; `<checkout>+identity` sends requests that do not
 * accept gzip, to read what compression costs (`+cap+identity` for both; the floor takes `+identity`
 * only, since it bills without admission and never reads a cap). AB_ROUNDS (6), AB_REQUESTS (1000 of each kind a round),
 * AB_WARM (500 of each kind first).
 */
import { request as httpRequest } from 'node:http';
import { basename, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createGunzip } from 'node:zlib';
import { DynamoStore } from '../functions/adapters/dynamodb/index.js';
import { createAccount, createKey } from '../lib/admin/operations.js';
import { runtimeInstalled } from '../lib/local/aws-lambda-ric.js';
import { ensureTables, freePort, localClient, startDynamoLocal } from '../lib/local/dynamodb-local.js';
import { localTableNames } from '../lib/local/stack.js';
import { TABLE_ENV } from '../lib/tables.js';
import { instancePids, processCpuMs } from './process-cpu.js';
import { startService, stopService } from './service-process.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const ROUNDS = Number(process.env.AB_ROUNDS ?? 6);
const REQUESTS = Number(process.env.AB_REQUESTS ?? 1000);
/** Requests of each kind before the rounds: the JIT's warm-up read 4.3 ms a JSON request in the first round after 50, 2.7 by the fourth. */
const WARM = Number(process.env.AB_WARM ?? 500);
const HERE = resolve(fileURLToPath(import.meta.url), '../..');
/** In place of a checkout: the floor with billing, of this checkout (`floor`) or another (`floor@<checkout>`). */
const FLOOR = 'floor';
/** After a checkout: its key has a daily cap (a checkout given twice must be two worktrees: each bundles into its own). */
const CAPPED = '+cap';
/** After a checkout: its requests do not accept gzip (to read what compression costs). */
const IDENTITY = '+identity';
const RUNTIME_DIR = resolve(HERE, process.env.LAMBDA_RUNTIME_DIR ?? '.cache/lambda-runtime');

/** About 500 prompt tokens of plain words, as the side by side sends. */
const PROMPT = Array.from(
  { length: 490 },
  (_, i) => ['alpha', 'beta', 'gamma', 'delta', 'omega'][i % 5],
).join(' ');
const body = (stream: boolean) =>
  JSON.stringify({
    model: 'svc-fast',
    messages: [{ role: 'user', content: `${PROMPT} [[sim:tokens=16]]` }],
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
  });

/** One system measured: a checkout's `npm start`, or the floor with billing. */
interface Gateway {
  label: string;
  key: string;
  /** Its requests accept gzip. */
  gzip: boolean;
  urlFor: (kind: Kind) => string;
  /** The processes (function instances) serving that kind. */
  pids: (kind: Kind) => number[];
  stop: () => Promise<void>;
}

type Kind = 'json' | 'stream';

const cpuByPid = (gateway: Gateway, kind: Kind) =>
  new Map(
    gateway.pids(kind).map((pid) => {
      try {
        return [pid, processCpuMs(pid)];
      } catch {
        return [pid, 0]; // the instance has gone
      }
    }),
  );

/** One request, read to its end (gunzipped when the gateway compressed it); its status. */
function send(gateway: Gateway, kind: Kind): Promise<number> {
  return new Promise((done, fail) => {
    const req = httpRequest(
      gateway.urlFor(kind),
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(gateway.gzip ? { 'accept-encoding': 'gzip, deflate' } : {}),
          authorization: `Bearer ${gateway.key}`,
        },
      },
      (response) => {
        const decoded =
          response.headers['content-encoding'] === 'gzip' ? response.pipe(createGunzip()) : response;
        decoded.on('error', fail);
        decoded.on('data', () => {});
        decoded.on('end', () => done(response.statusCode ?? 0));
      },
    );
    req.on('error', fail);
    req.end(body(kind === 'stream'));
  });
}

/** CPU ms a request of one kind on one gateway, over `count` requests back to back; NaN if an instance started. */
async function measure(gateway: Gateway, kind: Kind, count: number): Promise<number> {
  const instances = new Set(gateway.pids(kind));
  const before = cpuByPid(gateway, kind);
  for (let i = 0; i < count; i++) {
    const status = await send(gateway, kind);
    if (status !== 200) throw new Error(`${gateway.label} answered ${status}`);
  }
  const after = cpuByPid(gateway, kind);
  const deltas = [...after].map(([pid, ms]) => ms - (before.get(pid) ?? 0));
  const cpu = deltas.reduce((a, b) => a + b, 0) / count;
  // An instance started while measured puts its import (hundreds of ms) in the figure: not this request's.
  return gateway.pids(kind).every((pid) => instances.has(pid)) ? cpu : Number.NaN;
}

const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
const median = (values: number[]) => {
  const ordered = sorted(values);
  const mid = ordered.length >> 1;
  return ordered.length % 2
    ? (ordered[mid] ?? Number.NaN)
    : ((ordered[mid - 1] ?? 0) + (ordered[mid] ?? 0)) / 2;
};
const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;

/** Student's t at 97.5% for 1-30 degrees of freedom (a two-sided 95% interval), then the normal's. */
const T975 = [
  12.71, 4.3, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.2, 2.18, 2.16, 2.14, 2.13, 2.12, 2.11, 2.1,
  2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04,
];

/** The rounds' ratios: their mean and its 95% interval, then each round's. */
function ratios(values: number[]): string {
  const m = mean(values);
  const sd = Math.sqrt(values.reduce((a, v) => a + (v - m) ** 2, 0) / Math.max(1, values.length - 1));
  const half =
    values.length > 1 ? (T975[values.length - 2] ?? 1.96) * (sd / Math.sqrt(values.length)) : Number.NaN;
  return `${m.toFixed(3)} ± ${half.toFixed(3)} (${values.map((v) => v.toFixed(2)).join(', ')})`;
}

interface Checkout {
  dir: string;
  /** Its floor with billing, not its `npm start`. */
  floor: boolean;
  /** As given on the command line (`+cap`: its key has a daily cap; `+identity`: no gzip accepted). */
  label: string;
  key: string;
  gzip: boolean;
  /** `+cap`: its key has a daily cap, and its `npm start` runs with per-key daily caps on. */
  capped: boolean;
}

/** A checkout's `npm start` on a free port, against the shared DynamoDB Local and simulator. */
async function startGateway(checkout: Checkout, dynamoEndpoint: string, upstream: string): Promise<Gateway> {
  const port = await freePort();
  const { child } = await startService(['bin/local.ts'], /Ctrl-C/, {
    cwd: checkout.dir,
    env: {
      PORT: String(port),
      LOCAL_RUNTIME: 'aws-lambda-ric',
      LAMBDA_RUNTIME_DIR: RUNTIME_DIR,
      DYNAMODB_ENDPOINT: dynamoEndpoint,
      UPSTREAM_BASE_URL: upstream,
      LOG_LEVEL: 'SILENT',
      POWERTOOLS_METRICS_DISABLED: 'true',
      // Caps are off by default: a capped key is measured as one only with them on.
      ...(checkout.capped ? { KEY_DAILY_CAPS: 'on' } : {}),
    },
  });
  return {
    label: checkout.label,
    key: checkout.key,
    gzip: checkout.gzip,
    urlFor: () => `http://127.0.0.1:${port}/api/v1/chat/completions`,
    pids: () => instancePids(child.pid ?? 0, 'completions'),
    stop: () => stopService(child),
  };
}

/**
 * The floor with billing (bench/bare-proxy/billed-json.ts, billed-stream.ts) of a checkout: a bare relay
 * under the same runtime client, with billing's read and settlement through that checkout's store
 * adapter, started by bench/ab-floor.ts in the checkout's directory.
 */
async function startFloor(
  checkout: Checkout,
  billing: Record<string, string>,
  upstream: string,
): Promise<Gateway> {
  const { child, match } = await startService([resolve(HERE, 'bench/ab-floor.ts')], /FLOOR (\S+) (\S+)/, {
    cwd: checkout.dir,
    env: {
      UPSTREAM_BASE_URL: upstream,
      AB_FLOOR_BILLING: JSON.stringify(billing),
      LAMBDA_RUNTIME_DIR: RUNTIME_DIR,
    },
  });
  const name = (kind: Kind) => (kind === 'json' ? 'bare-billed' : 'bare-billed-stream');
  return {
    label: checkout.label,
    key: checkout.key,
    gzip: checkout.gzip,
    urlFor: (kind) => (kind === 'json' ? match[1] : match[2]) ?? '',
    pids: (kind) => instancePids(child.pid ?? 0, name(kind)),
    stop: () => stopService(child),
  };
}

/** The list started at its `i`-th element (mod its length). */
const rotated = <T>(list: T[], i: number) => [
  ...list.slice(i % list.length),
  ...list.slice(0, i % list.length),
];

async function main(paths: string[]): Promise<void> {
  if (!runtimeInstalled()) throw new Error('run scripts/install-lambda-runtime.sh first');
  const args = paths.length === 1 ? [paths[0] ?? '', HERE] : paths;
  if (args.length < 2) throw new Error('usage: npx tsx bench/ab-cpu.ts <baseline checkout> [<checkout>...]');
  const dynamo = await startDynamoLocal();
  const client = localClient(dynamo.endpoint);
  const tables = localTableNames();
  await ensureTables(client, tables);
  const store = new DynamoStore(client, tables);
  const sim = await startService(['bench/simulator.ts'], /SIMULATOR (\S+)/, { cwd: HERE });
  const upstream = sim.match[1] ?? '';
  const billing = {
    DYNAMODB_ENDPOINT: dynamo.endpoint,
    [TABLE_ENV.keys]: tables.keys,
    [TABLE_ENV.accounts]: tables.accounts,
    [TABLE_ENV.ledger]: tables.ledger,
    [TABLE_ENV.holds]: tables.holds,
  };
  let gateways: Gateway[] = [];
  try {
    const checkouts: Checkout[] = [];
    for (const [i, arg] of args.entries()) {
      const account = `ab-${i}`;
      await createAccount({ store }, account, '1000000');
      const { key, keyId } = await createKey({ store }, account, 'ab');
      const identity = arg.endsWith(IDENTITY);
      const rest = identity ? arg.slice(0, -IDENTITY.length) : arg;
      const capped = rest.endsWith(CAPPED);
      // A cap never reached ($10,000 a day): each request is admitted and billed as a capped key's.
      if (capped) await store.setKeyDailyCap(account, keyId, 10_000_000_000_000n);
      const path = capped ? rest.slice(0, -CAPPED.length) : rest;
      const floor = path === FLOOR || path.startsWith(`${FLOOR}@`);
      // The floor bills without admission: a cap on its key would be measured as if it cost nothing.
      if (floor && capped) throw new Error(`${arg}: the floor with billing does not read key caps`);
      const dir = path === FLOOR ? HERE : resolve(floor ? path.slice(FLOOR.length + 1) : path);
      const label = floor ? (path === FLOOR ? FLOOR : `${FLOOR}@${basename(dir)}`) : basename(dir);
      checkouts.push({
        dir,
        floor,
        label: `${label}${capped ? CAPPED : ''}${identity ? IDENTITY : ''}`,
        key,
        gzip: !identity,
        capped,
      });
    }
    console.log(
      `${checkouts.length} checkouts, ${ROUNDS} rounds, each on fresh instances: ${WARM} requests of each kind to warm, then ${REQUESTS} JSON requests and ${REQUESTS} 16-event streams on each, one at a time, the checkouts taking turns; CPU ms a request of the completions instances.`,
    );
    // By round, checkout and kind: the median and the mean CPU ms a request.
    const figures: Record<Kind, { median: number; mean: number }>[][] = [];
    let left = 0;
    for (let round = 0; round < ROUNDS; round++) {
      // Fresh processes each round: two instances of the same bundle, warmed alike, differ by a few per cent
      // for as long as they live (what the JIT made of their history), so one process is one sample.
      const order = round % 2 === 0 ? checkouts : [...checkouts].reverse();
      gateways = [];
      for (const checkout of order)
        gateways.push(
          checkout.floor
            ? await startFloor(checkout, billing, upstream)
            : await startGateway(checkout, dynamo.endpoint, upstream),
        );
      for (const gateway of gateways)
        for (const kind of ['json', 'stream'] as const)
          for (let pass = 0; pass < 6 && Number.isNaN(await measure(gateway, kind, WARM)); pass++);
      // One request at a time, the checkouts taking turns: this machine's CPU time per request drifts by up to
      // 2x within a minute (a virtual machine's neighbours), on every checkout alike. The turns rotate, so no
      // checkout ever serves two requests in a row: one that did (its code and data still in the CPU's
      // caches) read about 5% less than one that never did, with the same bundle.
      const samples = new Map<Gateway, Record<Kind, number[]>>(
        gateways.map((g) => [g, { json: [], stream: [] }]),
      );
      for (const kind of ['json', 'stream'] as const)
        for (let i = 0; i < REQUESTS; i++)
          for (const gateway of rotated(gateways, i)) {
            const cpu = await measure(gateway, kind, 1);
            if (Number.isNaN(cpu)) left += 1;
            else samples.get(gateway)?.[kind].push(cpu);
          }
      figures.push(
        checkouts.map((checkout) => {
          const own = samples.get(gateways.find((g) => g.label === checkout.label) as Gateway) ?? {
            json: [],
            stream: [],
          };
          return {
            json: { median: median(own.json), mean: mean(own.json) },
            stream: { median: median(own.stream), mean: mean(own.stream) },
          };
        }),
      );
      console.log(
        `round ${round + 1}: ${checkouts
          .map(
            (checkout, c) =>
              `${checkout.label} JSON ${figures[round]?.[c]?.json.median.toFixed(3)}/${figures[round]?.[c]?.json.mean.toFixed(3)}, stream ${figures[round]?.[c]?.stream.median.toFixed(3)}/${figures[round]?.[c]?.stream.mean.toFixed(3)}`,
          )
          .join('; ')} (median/mean)`,
      );
      await Promise.all(gateways.map((gateway) => gateway.stop()));
    }
    console.log(`Requests left out (an instance started while measured): ${left}.`);
    console.log('');
    console.log(
      '| checkout | kind | CPU ms a request: median, mean (medians over rounds) | median vs baseline: mean ± 95% (rounds) | mean vs baseline: mean ± 95% (rounds) |',
    );
    console.log('|---|---|---|---|---|');
    for (const kind of ['json', 'stream'] as const)
      for (const [c, checkout] of checkouts.entries()) {
        const of = (stat: 'median' | 'mean') => figures.map((round) => round[c]?.[kind][stat] ?? Number.NaN);
        const versus = (stat: 'median' | 'mean') =>
          c === 0
            ? 'baseline'
            : ratios(
                figures.map(
                  (round) => (round[c]?.[kind][stat] ?? Number.NaN) / (round[0]?.[kind][stat] ?? Number.NaN),
                ),
              );
        console.log(
          `| ${checkout.label} | ${kind === 'json' ? 'JSON' : '16-event stream'} | ${median(of('median')).toFixed(3)}, ${median(of('mean')).toFixed(3)} | ${versus('median')} | ${versus('mean')} |`,
        );
      }
  } finally {
    await Promise.all(gateways.map((gateway) => gateway.stop()));
    sim.child.kill('SIGTERM');
    client.destroy();
    await dynamo.stop();
  }
}

await main(process.argv.slice(2));
process.exit(0);
