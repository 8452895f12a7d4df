/**
 * Billing's two DynamoDB exchanges alone, as the floor with billing makes them (bare-proxy/billing.ts:
 * the read of key and account, then the settlement's transaction), in a tight loop against DynamoDB
 * Local: the CPU per request of the store adapter of one or more checkouts, compared in interleaved
 * rounds. Each round runs each checkout in a fresh Node 22 process with the functions' heap flags
 * (160 MB), warms it, then reads process.cpuUsage() (all its threads: GC and libuv included) over
 * the calls back to back and again with an idle gap before each, as between invocations.
 *
 * `npx tsx bench/billed-cpu.ts [checkout...]` (default: this one; another is a worktree of an older
 * commit, e.g. `git worktree add /work/wt/before 19af6c5`, with node_modules linked in).
 * BILLED_ROUNDS (5), BILLED_CALLS (600), BILLED_PACED (150), BILLED_GAP_MS (5). BILLED_CAPPED=1: the
 * key has a daily spend cap ($1,000, never reached), so each request is billed as a capped key's is
 * (functions/completions/admission.ts): the read, the hold conditioned on the key's day counter, and
 * the settlement that releases it (a checkout with per-key caps only). With BILLED_PROFILE set
 * to a directory each process also writes a V8 CPU profile of its measured calls there (sampled by
 * the wall clock: a socket write during which the process was descheduled reads as CPU there, which
 * it is not); with BILLED_THREADS set it prints the back to back CPU by thread (main, V8's, libuv's).
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { lambdaNodeFlags, NODE22, runtimeInstalled } from '../lib/local/aws-lambda-ric.js';
import { floorCharge } from './bare-proxy/floor-charge.js';

const numberFromEnv = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const ROUNDS = numberFromEnv('BILLED_ROUNDS', 5);
const CALLS = numberFromEnv('BILLED_CALLS', 600);
const PACED = numberFromEnv('BILLED_PACED', 150);
const GAP_MS = numberFromEnv('BILLED_GAP_MS', 5);
const WARM_CALLS = 300;

interface Figures {
  backToBack: number;
  paced: number;
  /** Of backToBack, the kernel's (system) CPU. */
  system: number;
}

if (process.argv[2] === '--child') await child(process.argv[3] ?? '', process.argv[4] ?? '');
else await parent(process.argv.slice(2));

async function parent(checkouts: string[]): Promise<void> {
  const roots = (checkouts.length > 0 ? checkouts : [resolve(fileURLToPath(import.meta.url), '../..')]).map(
    (root) => resolve(root),
  );
  const node = runtimeInstalled() ? NODE22 : process.execPath;
  const { startDynamoLocal } = await import('../lib/local/dynamodb-local.js');
  const dynamo = await startDynamoLocal();
  const results = new Map<string, Figures[]>();
  try {
    console.log(
      `${node === NODE22 ? 'Node 22' : process.version}, DynamoDB Local; ${ROUNDS} rounds of ${CALLS} requests back to back and ${PACED} with ${GAP_MS} ms idle before each, after ${WARM_CALLS} to warm; CPU microseconds a request (read + settlement).`,
    );
    for (let round = 0; round < ROUNDS; round++) {
      for (const root of roots) {
        const figures = await runChild(node, root, dynamo.endpoint);
        results.set(root, [...(results.get(root) ?? []), figures]);
        console.log(
          `round ${round + 1} ${root}: ${figures.backToBack.toFixed(0)} back to back (${figures.system.toFixed(0)} of it the kernel's), ${figures.paced.toFixed(0)} paced`,
        );
      }
    }
  } finally {
    await dynamo.stop();
  }
  const summary = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    return `${sorted[(sorted.length - 1) >> 1]?.toFixed(0)} (${sorted[0]?.toFixed(0)}-${sorted.at(-1)?.toFixed(0)})`;
  };
  console.log('');
  console.log('| checkout | back to back: median (range) | paced: median (range) |');
  console.log('|---|---|---|');
  for (const [root, figures] of results)
    console.log(
      `| ${root} | ${summary(figures.map((f) => f.backToBack))} | ${summary(figures.map((f) => f.paced))} |`,
    );
}

function runChild(node: string, root: string, endpoint: string): Promise<Figures> {
  const script = fileURLToPath(import.meta.url);
  return new Promise((done, fail) => {
    const process_ = spawn(
      node,
      [...lambdaNodeFlags(160), '--import', 'tsx', script, '--child', root, endpoint],
      {
        cwd: root,
        env: { ...process.env, NODE_OPTIONS: '' },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let out = '';
    process_.stdout.setEncoding('utf8').on('data', (text: string) => {
      out += text;
    });
    process_.once('error', fail);
    process_.once('exit', (code) => {
      const line = out.trim().split('\n').at(-1) ?? '';
      if (code !== 0 || !line.startsWith('{')) fail(new Error(`${root}: exit ${code}: ${out}`));
      else done(JSON.parse(line) as Figures);
    });
  });
}

/** One checkout's store adapter: seeds its own tables and account, then measures. */
async function child(root: string, endpoint: string): Promise<void> {
  const from = (path: string) => import(resolve(root, path));
  const prefix = `billed-${root.replace(/\W+/g, '-')}-`;
  const { localTableNames } = await from('lib/local/stack.ts');
  const { ensureTables, localClient } = await from('lib/local/dynamodb-local.ts');
  const { TABLE_ENV } = await from('functions/adapters/dynamodb/schema.ts');
  const tables = localTableNames(prefix) as Record<string, string>;
  const admin = localClient(endpoint);
  await ensureTables(admin, tables);
  for (const [id, name] of Object.entries(TABLE_ENV as Record<string, string>))
    process.env[name] = tables[id];
  process.env.DYNAMODB_ENDPOINT = endpoint;
  const { DynamoStore } = await from('functions/adapters/dynamodb/index.ts');
  const { createAccount, createKey } = await from('lib/admin/operations.ts');
  const accountId = `bench-${randomUUID().slice(0, 8)}`;
  await createAccount({ store: new DynamoStore(admin, tables) }, accountId, '1000');
  const { key, keyId } = await createKey({ store: new DynamoStore(admin, tables) }, accountId, 'bench');
  const capNano = process.env.BILLED_CAPPED ? 1_000_000_000_000n : undefined;
  if (capNano) await new DynamoStore(admin, tables).setKeyDailyCap(accountId, keyId, capNano);
  admin.destroy();

  const { getStore } = await from('functions/adapters/dynamodb/client.ts');
  const { hashKey } = await from('functions/core/auth.ts');
  const { newGenerationId } = await from('functions/core/ids.ts');
  const store = getStore();
  // As bare-proxy/billing.ts bills a request.
  const billedRequest = async () => {
    const principal = await store.loadPrincipal(hashKey(key));
    if (!principal) throw new Error('no principal');
    const charge = floorCharge(principal, newGenerationId());
    if (!capNano) return void (await store.settleCharge(charge));
    // A capped key's request: its worst case held against the key's day counter first (one slice: the
    // share is the cap), then settled with the hold released in the same transaction.
    const hold = {
      accountId: principal.accountId,
      holdId: charge.generationId,
      amountNano: 1_000_000n,
      expiresAt: Date.now() + 360_000,
      createdAt: charge.createdAt,
      keyId: principal.keyId,
    };
    if ((await store.placeHold(hold, { capShareNano: capNano })) !== 'held') throw new Error('hold refused');
    await store.settleCharge(charge, { hold });
  };
  const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
  const measure = async (calls: number, gapMs: number) => {
    let cpu = 0;
    let system = 0;
    for (let i = 0; i < calls; i++) {
      if (gapMs > 0) await sleep(gapMs);
      const start = process.cpuUsage();
      await billedRequest();
      const used = process.cpuUsage(start);
      cpu += used.user + used.system;
      system += used.system;
    }
    return { cpu: cpu / calls, system: system / calls };
  };
  for (let i = 0; i < WARM_CALLS; i++) await billedRequest();
  const profileDir = process.env.BILLED_PROFILE;
  const inspector = profileDir ? await startProfile() : undefined;
  const threadsBefore = threadCpu();
  const { cpu: backToBack, system } = await measure(CALLS, 0);
  if (process.env.BILLED_THREADS) {
    const threadsAfter = threadCpu();
    const byName = new Map<string, number>();
    for (const [tid, { name, ns }] of threadsAfter) {
      const thread = tid === String(process.pid) ? 'main' : name;
      byName.set(thread, (byName.get(thread) ?? 0) + (ns - (threadsBefore.get(tid)?.ns ?? 0)) / 1000 / CALLS);
    }
    console.error(`${root}: us a request by thread`, JSON.stringify(Object.fromEntries(byName)));
  }
  const { cpu: paced } = await measure(PACED, GAP_MS);
  if (inspector && profileDir) await inspector(resolve(profileDir, `${prefix}${Date.now()}.cpuprofile`));
  console.log(JSON.stringify({ backToBack, paced, system } satisfies Figures));
  process.exit(0);
}

/** Each thread of this process: its name and its CPU time so far (ns). */
function threadCpu(): Map<string, { name: string; ns: number }> {
  const threads = new Map<string, { name: string; ns: number }>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const name = readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim();
      const ns = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      threads.set(tid, { name, ns });
    } catch {
      // The thread ended.
    }
  }
  return threads;
}

/** A V8 CPU profile from now; the returned function writes it to a file. */
async function startProfile(): Promise<(file: string) => Promise<void>> {
  const { Session } = await import('node:inspector/promises');
  const { writeFile } = await import('node:fs/promises');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  return async (file) => {
    const { profile } = await session.post('Profiler.stop');
    await writeFile(file, JSON.stringify(profile));
  };
}
