/**
 * `npm run bench:busy`: one account at DynamoDB's real limits. One local stack (DynamoDB Local in
 * memory behind the limits layer, lib/local/dynamodb-limits.ts, at scale k; the simulator; the
 * emulator), and an open loop of svc-fast JSON requests at 5,000/k a second for BENCH_BUSY_SECONDS
 * (default 60) on one account split into BENCH_BUSY_SLICES slices (default 32; 1 is an account kept
 * in one item), its requests spread over BENCH_BUSY_KEYS keys (default 4: one key's item takes at
 * most 3,000 strongly consistent reads a second): first a funded one, then a near-empty one. Requests start on schedule
 * whether or not earlier ones have been answered. Once every request and its settlement is done,
 * prints per account: served (200), 5xx, 503, 402, other; unbilled (served, no ledger entry);
 * deferred (failed settlements kept durably for later completion: today, usage records kept on
 * holds); the limits layer's conflicts and throttles; each hot partition's units against its limit;
 * the balance drop against the ledger and the sum of the `usage.cost` the clients saw; and the
 * overdraft against its bound.
 *
 * BENCH_BUSY_SCALE: k (default 100, i.e. 50 requests a second: what this 2-core machine serves with
 * the emulator's BENCH_BUSY_INSTANCES completions instances, default 16, each one request at a time); BENCH_BUSY_SECONDS: the run's length;
 * BENCH_BUSY_EMPTY_USD: the near-empty account's credit (default 0.01). The overdraft bound of a
 * split account is one request's bill per slice.
 */

import { TRANSFER_DELAY_MS } from '../functions/core/store.js';
import { moveDueTransfers, sweepExpiredHolds } from '../functions/sweeper/sweep.js';
import { createAccount, createKey, getAccount, listLedger } from '../lib/admin/operations.js';
import type { LimitsMetrics } from '../lib/local/dynamodb-limits.js';
import { startLocalStack } from '../lib/local/stack.js';
import { completeOnce, type Served } from '../test/support/busy-load.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
process.env.LOG_LEVEL ??= 'SILENT';
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
const SCALE = Number(process.env.BENCH_BUSY_SCALE ?? 100);
const SECONDS = Number(process.env.BENCH_BUSY_SECONDS ?? 60);
const EMPTY_USD = process.env.BENCH_BUSY_EMPTY_USD ?? '0.01';
const RATE = 5_000 / SCALE;
const SLICES = Number(process.env.BENCH_BUSY_SLICES ?? 32);
const KEYS = Number(process.env.BENCH_BUSY_KEYS ?? 4);

type Outcome = Served;

const INSTANCES = Number(process.env.BENCH_BUSY_INSTANCES ?? 16);
const stack = await startLocalStack({
  tablePrefix: 'benchbusy-',
  limits: { scale: SCALE },
  // Every instance started before the load: a cold start on a loaded 2-core machine takes seconds.
  functions: { completions: { maxInstances: INSTANCES, warmInstances: INSTANCES } },
});
const limits = stack.limits;
if (!limits) throw new Error('the limits layer did not start');
const admin = { store: stack.store };

const request = (key: string, i: number) => completeOnce(stack, key, i);

/** Starts requests at RATE a second for SECONDS, on schedule, and waits for all of them. */
async function openLoop(keys: string[]): Promise<{ outcomes: Outcome[]; lateStartMs: number }> {
  const total = Math.round(RATE * SECONDS);
  const pending: Promise<Outcome>[] = [];
  const started = performance.now();
  let lateStartMs = 0;
  let answered = 0;
  const progress = setInterval(() => {
    const m = limits?.metrics();
    console.log(
      `  ${((performance.now() - started) / 1000).toFixed(0)} s: ${pending.length} started, ${answered} answered, ${m?.conflicts.cancelledTransactions} cancelled transactions, throttles ${JSON.stringify(m?.throttles)}`,
    );
  }, 10_000);
  while (pending.length < total) {
    const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * RATE) + 1);
    while (pending.length < due) {
      lateStartMs = Math.max(lateStartMs, performance.now() - started - (pending.length / RATE) * 1000);
      pending.push(
        request(keys[pending.length % keys.length] ?? '', pending.length).then((outcome) => {
          answered += 1;
          return outcome;
        }),
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  try {
    return { outcomes: await Promise.all(pending), lateStartMs };
  } finally {
    clearInterval(progress);
  }
}

const usd = (nano: bigint) => `$${(Number(nano) / 1e9).toFixed(9)}`;

async function run(label: string, credit: string) {
  const accountId = `busy-${label}-${Date.now().toString(36)}`;
  await createAccount(admin, accountId, credit);
  if (SLICES > 1) {
    await stack.store.splitAccount(accountId, SLICES);
    // The rebalance's transfers move once every request admitted before the split has ended (six
    // minutes on AWS); nothing runs yet here, so they are moved now, as the sweeper would then.
    await moveDueTransfers(stack.storeAs('sweeper'), Date.now() + TRANSFER_DELAY_MS);
  }
  const keys: string[] = [];
  for (let i = 0; i < KEYS; i++) keys.push((await createKey(admin, accountId, `bench-${i}`)).key);
  limits?.resetMetrics();
  const before = (await getAccount(admin, accountId))?.balanceNano ?? 0n;
  const started = performance.now();
  const { outcomes, lateStartMs } = await openLoop(keys);
  const loadSeconds = (performance.now() - started) / 1000;
  await stack.emulator.quiescent();
  // What was deferred is completed by the sweeper's next run (every minute when deployed): run it once.
  const deferredBefore = (await stack.store.listHolds(accountId)).filter((h) => h.deferred).length;
  const swept = await sweepExpiredHolds(stack.store);
  const metrics = limits?.metrics() as LimitsMetrics;
  const after = (await getAccount(admin, accountId))?.balanceNano ?? 0n;
  const charges = (await listLedger(admin, accountId)).filter((e) => e.type === 'charge');
  const billed = new Set(charges.map((c) => c.entryId));
  const holds = await stack.store.listHolds(accountId);
  const served = outcomes.filter((o) => o.status === 200);
  const count = (test: (status: number) => boolean) => outcomes.filter((o) => test(o.status)).length;
  const servedCost = served.reduce((sum, o) => sum + (o.costNano ?? 0n), 0n);
  const ledgerSum = -charges.reduce((sum, c) => sum + c.deltaNano, 0n);
  let largestCharge = 0n;
  for (const c of charges) if (-c.deltaNano > largestCharge) largestCharge = -c.deltaNano;
  console.log(
    `\n${label} account ($${credit}, ${SLICES} slices, ${KEYS} keys): ${outcomes.length} requests at ${RATE}/s for ${SECONDS} s (k=${SCALE})`,
  );
  console.log(
    `  load took ${loadSeconds.toFixed(1)} s; the latest start was ${lateStartMs.toFixed(0)} ms behind schedule`,
  );
  console.log(
    `  served ${served.length}  5xx ${count((s) => s >= 500)}  503 ${count((s) => s === 503)}  402 ${count((s) => s === 402)}  other ${count((s) => s !== 200 && s !== 402 && s < 500)}`,
  );
  console.log(
    `  unbilled ${served.filter((o) => !billed.has(o.id ?? '')).length} (after one sweep)  deferred ${deferredBefore}, completed by the sweep ${swept.completed}  holds left ${holds.length}  conflicts ${metrics.conflicts.cancelledTransactions} cancelled transactions + ${metrics.conflicts.conflictExceptions} refused writes  throttles ${JSON.stringify(metrics.throttles)}`,
  );
  console.log(
    `  balance drop ${usd(before - after)}  ledger ${usd(ledgerSum)}  replies ${usd(servedCost)}  ${before - after === ledgerSum && ledgerSum === servedCost ? 'equal' : 'NOT EQUAL'}`,
  );
  if (after < 0n)
    console.log(
      `  overdraft ${usd(-after)} against the bound of one request's bill per slice (${SLICES} x largest charge ${usd(largestCharge)} = ${usd(BigInt(SLICES) * largestCharge)})`,
    );
  else console.log(`  no overdraft (balance ${usd(after)})`);
  console.log(
    `  partitions (limit ${metrics.writeLimitPerSecond} write / ${metrics.readLimitPerSecond} read units a second each):`,
  );
  const prefix = 'benchbusy-';
  const peakWrite = Math.max(...metrics.partitions.map((p) => p.peakWritePerSecond));
  const peakRead = Math.max(...metrics.partitions.map((p) => p.peakReadPerSecond));
  console.log(
    `    ${metrics.partitions.length} partitions; the busiest peaked at ${peakWrite.toFixed(0)} write and ${peakRead.toFixed(0)} read units in a second; ${metrics.partitions.filter((p) => p.throttled > 0).length} throttled. The five busiest:`,
  );
  for (const p of metrics.partitions.filter((p) => p.throttled > 0))
    console.log(
      `    throttled: ${p.table.replace(prefix, '')} ${p.key.slice(0, 70)} ${p.throttled} times (read peak ${p.peakReadPerSecond.toFixed(0)}/s, write peak ${p.peakWritePerSecond.toFixed(0)}/s)`,
    );
  for (const p of metrics.partitions.slice(0, 5))
    console.log(
      `    ${p.table.replace(prefix, '').padEnd(9)} ${p.key.slice(0, 44).padEnd(44)} write ${p.writeUnits.toFixed(0).padStart(6)} (${(p.writeUnits / loadSeconds).toFixed(1)}/s avg, peak ${p.peakWritePerSecond.toFixed(0)}/s)  read ${p.readUnits.toFixed(0).padStart(6)} (peak ${p.peakReadPerSecond.toFixed(0)}/s)  throttled ${p.throttled}`,
    );
}

try {
  await run('funded', '10000');
  await run('near-empty', EMPTY_USD);
} finally {
  await stack.stop();
}
