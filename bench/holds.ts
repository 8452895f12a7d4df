/**
 * `npm run bench:holds`: what a hold costs a near-empty account, against a funded one (issue: prepaid
 * means prepaid). One local stack (DynamoDB Local in memory, the simulator, the emulator); for each
 * account, BENCH_HOLD_SAMPLES sequential streamed requests, timing the first byte of the first
 * data chunk (not the status line: a stream's status now waits for the upstream's first event).
 * The funded account's requests take the fast path (one read before the upstream); the near-empty
 * account's place a hold first (one read and one conditional write). Prints p50/p90 and the difference.
 */
import { writeFileSync } from 'node:fs';
import { createAccount, createKey } from '../lib/admin/operations.js';
import { startLocalStack } from '../lib/local/stack.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
process.env.LOG_LEVEL ??= 'SILENT';
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
const SAMPLES = Number(process.env.BENCH_HOLD_SAMPLES ?? 200);

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

async function firstDataMs(baseUrl: string, key: string): Promise<number> {
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
  let at = Number.NaN;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    if (Number.isNaN(at) && text.includes('data: ')) at = performance.now() - started;
  }
  return at;
}

const stack = await startLocalStack({ tablePrefix: 'benchholds-' });
try {
  const admin = { store: stack.store };
  await createAccount(admin, 'funded', '1000');
  await createAccount(admin, 'near-empty', '1');
  const funded = (await createKey(admin, 'funded', 'bench')).key;
  const nearEmpty = (await createKey(admin, 'near-empty', 'bench')).key;
  // $1 covers far fewer than MAX_CONCURRENCY (1000) worst cases of ~$0.012: every request holds;
  // $1000 covers them all: the fast path.
  for (let i = 0; i < 20; i++) {
    await firstDataMs(stack.baseUrl, funded);
    await firstDataMs(stack.baseUrl, nearEmpty);
  }
  const results: Record<string, number[]> = { funded: [], 'near-empty': [] };
  for (let i = 0; i < SAMPLES; i++) {
    results.funded?.push(await firstDataMs(stack.baseUrl, funded));
    results['near-empty']?.push(await firstDataMs(stack.baseUrl, nearEmpty));
  }
  const lines = ['| account | path | first data chunk p50 ms | p90 ms |', '|---|---|---|---|'];
  const p50: Record<string, number> = {};
  for (const [name, samples] of Object.entries(results)) {
    const sorted = [...samples].sort((a, b) => a - b);
    p50[name] = percentile(sorted, 50);
    lines.push(
      `| ${name} | ${name === 'funded' ? 'read, upstream, settle' : 'read, hold, upstream, settle'} | ${percentile(sorted, 50).toFixed(2)} | ${percentile(sorted, 90).toFixed(2)} |`,
    );
  }
  const added = (p50['near-empty'] ?? 0) - (p50.funded ?? 0);
  lines.push(
    '',
    `A hold adds ${added.toFixed(2)} ms at p50 (${SAMPLES} sequential streamed requests each, interleaved).`,
  );
  const text = lines.join('\n');
  console.log(text);
  writeFileSync(
    new URL(`./results/holds-${new Date().toISOString().slice(0, 10)}.md`, import.meta.url),
    `${text}\n`,
  );
} finally {
  await stack.stop();
}
