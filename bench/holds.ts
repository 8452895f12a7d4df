/**
 * `npm run bench:holds`: what a hold costs a near-empty account, against a funded one (issue: prepaid
 * means prepaid). One local stack (DynamoDB Local in memory, the simulator, the emulator); for each
 * account, BENCH_HOLD_SAMPLES sequential streamed requests, timing the first byte of the first
 * data chunk (not the status line: a stream's status now waits for the upstream's first event) and
 * the stream's end, and as many JSON requests, timing the whole reply. The funded account's requests
 * take the fast path (one read before the upstream, the reply before the settlement); the near-empty
 * account's place a hold first (one read and one conditional write), and their reply ends only once
 * they are settled (a JSON body waits for the settlement, a stream's final usage chunk and [DONE]
 * too). Prints p50/p90 and the differences.
 *
 * BENCH_HOLD_MB=160: the completions function runs as Lambda runs it (its bundle under aws-lambda-ric
 * on Node 22, one instance) held to that memory size's CPU share (bench/cpu-limit.ts), alone on core 1
 * while this process and all it starts run on core 0, as `BENCH_ONLY=rate npm run bench` does.
 */
import { writeFileSync } from 'node:fs';
import { createAccount, createKey } from '../lib/admin/operations.js';
import { bundleFunctions, ricLauncher } from '../lib/local/aws-lambda-ric.js';
import { startLocalStack } from '../lib/local/stack.js';
import { type CpuLimit, available as cgroupAvailable, limitCpu, pinToCore } from './cpu-limit.js';
import { completionsPids } from './paced-rate.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
process.env.LOG_LEVEL ??= 'SILENT';
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
const SAMPLES = Number(process.env.BENCH_HOLD_SAMPLES ?? 200);
const LIMIT_MB = process.env.BENCH_HOLD_MB ? Number(process.env.BENCH_HOLD_MB) : undefined;
if (LIMIT_MB !== undefined) {
  if (!cgroupAvailable())
    throw new Error('BENCH_HOLD_MB needs write access to /sys/fs/cgroup/cpu and taskset');
  pinToCore(process.pid, 0);
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

/** A streamed request: its first data chunk and its end, in ms from the request. */
async function streamMs(baseUrl: string, key: string): Promise<{ firstData: number; end: number }> {
  const started = performance.now();
  const response = await fetch(`${baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'svc-fast',
      messages: [{ role: 'user', content: 'hi [[sim:tokens=3]]' }],
      stream: true,
    }),
  });
  const reader = response.body?.getReader();
  if (!reader || response.status !== 200) throw new Error(`status ${response.status}`);
  const decoder = new TextDecoder();
  let text = '';
  let firstData = Number.NaN;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    if (Number.isNaN(firstData) && text.includes('data: ')) firstData = performance.now() - started;
  }
  return { firstData, end: performance.now() - started };
}

/** A JSON request: its whole reply, in ms from the request. */
async function jsonMs(baseUrl: string, key: string): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'hi [[sim:tokens=3]]' }] }),
  });
  await response.arrayBuffer();
  if (response.status !== 200) throw new Error(`status ${response.status}`);
  return performance.now() - started;
}

const stack = await startLocalStack({
  tablePrefix: 'benchholds-',
  ...(LIMIT_MB !== undefined
    ? {
        launcher: ricLauncher(await bundleFunctions('.cache/paced-bundles')),
        // One instance, so that every request meets the same CPU limit.
        functions: { completions: { maxInstances: 1, warmInstances: 1 } },
        env: { LOG_LEVEL: 'SILENT', POWERTOOLS_METRICS_DISABLED: 'true' },
      }
    : {}),
});
let limit: CpuLimit | undefined;
try {
  const admin = { store: stack.store };
  await createAccount(admin, 'funded', '1000');
  await createAccount(admin, 'near-empty', '1');
  const funded = (await createKey(admin, 'funded', 'bench')).key;
  const nearEmpty = (await createKey(admin, 'near-empty', 'bench')).key;
  // $1 covers far fewer than MAX_CONCURRENCY (1000) worst cases of ~$0.012: every request holds;
  // $1000 covers them all: the fast path.
  const accounts = { funded, 'near-empty': nearEmpty } as const;
  type Measure = 'first data chunk' | 'stream end' | 'JSON reply';
  const results: Record<Measure, Record<keyof typeof accounts, number[]>> = {
    'first data chunk': { funded: [], 'near-empty': [] },
    'stream end': { funded: [], 'near-empty': [] },
    'JSON reply': { funded: [], 'near-empty': [] },
  };
  const round = async (record: boolean) => {
    for (const [name, key] of Object.entries(accounts) as [keyof typeof accounts, string][]) {
      const stream = await streamMs(stack.baseUrl, key);
      const json = await jsonMs(stack.baseUrl, key);
      if (!record) continue;
      results['first data chunk'][name].push(stream.firstData);
      results['stream end'][name].push(stream.end);
      results['JSON reply'][name].push(json);
    }
  };
  // Warm, unlimited: the cold start, the JIT, the connections.
  for (let i = 0; i < 20; i++) await round(false);
  if (LIMIT_MB !== undefined) {
    const [pid] = completionsPids();
    if (pid === undefined) throw new Error('no completions instance found to limit');
    limit = limitCpu(pid);
    limit.set(LIMIT_MB);
  }
  for (let i = 0; i < SAMPLES; i++) await round(true);
  const lines = [
    '| measure | funded p50 ms | p90 ms | near-empty (held) p50 ms | p90 ms | held adds at p50 ms |',
    '|---|---|---|---|---|---|',
  ];
  for (const [measure, byAccount] of Object.entries(results)) {
    const funded = [...byAccount.funded].sort((a, b) => a - b);
    const held = [...byAccount['near-empty']].sort((a, b) => a - b);
    lines.push(
      `| ${measure} | ${percentile(funded, 50).toFixed(2)} | ${percentile(funded, 90).toFixed(2)} | ${percentile(held, 50).toFixed(2)} | ${percentile(held, 90).toFixed(2)} | ${(percentile(held, 50) - percentile(funded, 50)).toFixed(2)} |`,
    );
  }
  lines.push(
    '',
    `${SAMPLES} sequential streamed and ${SAMPLES} JSON requests per account, interleaved${LIMIT_MB !== undefined ? `; the completions function one instance under aws-lambda-ric held to ${LIMIT_MB} MB's CPU share` : ''}. Funded: read, upstream, reply, then the settlement. ` +
      'Held: read, hold, upstream, and the reply ends after the settlement (the first data chunk does not wait for it).',
  );
  const text = lines.join('\n');
  console.log(text);
  writeFileSync(
    new URL(
      `./results/holds-${new Date().toISOString().slice(0, 10)}${LIMIT_MB !== undefined ? `-${LIMIT_MB}mb` : ''}.md`,
      import.meta.url,
    ),
    `${text}\n`,
  );
} finally {
  limit?.release();
  await stack.stop();
}
