/**
 * `npx tsx bench/log-lines.ts`: CPU of a generation's log lines as the completions function writes
 * them (functions/shared/observability.ts: Powertools' Logger and Metrics, INFO, EMF on), in a fresh
 * Node 22 process (the runtime the functions run on, when scripts/install-lambda-runtime.sh has
 * installed it; else this Node) whose stdout is a pipe, as in Lambda. One iteration every 5 ms (a
 * paced process wakes up cold, as a function between requests does), 500 measured after 100; the
 * same loop with no line is the baseline. Prints microseconds per iteration for: no line; the usage
 * record alone (what a settled generation writes now: its metrics are read from it by CloudWatch
 * metric filters); the record and an EMF metrics line; and those plus the `generation settled` line
 * that repeated the record (the three lines a generation wrote until 2026-11-25).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { NODE22 } from '../lib/local/aws-lambda-ric.js';

const child = `
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
const logger = new Logger({ serviceName: 'hosted-model-api', logLevel: 'INFO' });
const metrics = new Metrics({ namespace: 'HostedModelApi', serviceName: 'hosted-model-api' });
const lines = process.argv[1];
const record = {
  accountId: 'acct_0123456789abcdef', generationId: 'gen-1767225600-AAAAAAAAAAAAAAAAAAAA',
  keyId: 'key_0123456789abcdef', tier: 'svc-fast', upstreamModel: 'gpt-4o-mini', promptTokens: 120,
  completionTokens: 16, cachedTokens: 0, upstreamCostUsd: '0.0000276', billedNano: '35880',
  estimated: false, finishReason: 'stop', createdAt: new Date().toISOString(),
};
let i = 0;
let before;
const tick = () => {
  if (i === 100) before = process.cpuUsage();
  if (lines !== 'none') logger.info('generation usage', { record, billedUsd: '0.00003588', latencyMs: 5 });
  if (lines === 'record+metrics' || lines === 'record+metrics+settled') {
    metrics.addDimension('tier', record.tier);
    metrics.addMetric('PromptTokens', MetricUnit.Count, 120);
    metrics.addMetric('CompletionTokens', MetricUnit.Count, 16);
    metrics.addMetric('BilledMicroUsd', MetricUnit.Count, 35);
    metrics.publishStoredMetrics();
  }
  if (lines === 'record+metrics+settled') logger.info('generation settled', { ...record, latencyMs: 5 });
  if (++i < 600) setTimeout(tick, 5);
  else {
    const used = process.cpuUsage(before);
    process.stderr.write(String((used.user + used.system) / 500));
  }
};
tick();
`;

const node = existsSync(NODE22) ? NODE22 : process.execPath;
const root = fileURLToPath(new URL('..', import.meta.url));

function run(lines: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const proc = spawn(node, ['--input-type=module', '-e', child, lines], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    proc.stdout.resume(); // a pipe, drained, as Lambda's log capture does
    let err = '';
    proc.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    proc.once('exit', (code) => (code === 0 ? resolve(Number(err)) : reject(new Error(err))));
  });
}

console.log(`node: ${node === NODE22 ? 'Node 22 (lambda runtime)' : process.version}; stdout a pipe`);
console.log('| lines per generation | us per iteration (three runs) |');
console.log('|---|---|');
for (const lines of ['none', 'record', 'record+metrics', 'record+metrics+settled']) {
  const runs: number[] = [];
  for (let r = 0; r < 3; r++) runs.push(await run(lines));
  console.log(`| ${lines} | ${runs.map((us) => us.toFixed(0)).join(', ')} |`);
}
