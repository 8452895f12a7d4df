/**
 * `npx tsx bench/gzip-setup.ts`: CPU per compressed reply of the gzip stream the functions use
 * (functions/shared/compression.ts), with zlib's default sizes and with GZIP_OPTIONS, each in a fresh
 * Node 22 process (the runtime the functions run on, when scripts/install-lambda-runtime.sh has
 * installed it; else this Node) with and without the functions' MALLOC_TRIM_THRESHOLD_. Each stream
 * is made, written once (19 or 300 SSE chunks, as one packet of a reply), ended and read to its end;
 * 500 of them, after 50 unmeasured. Prints microseconds per stream and the compressed bytes.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { GZIP_OPTIONS } from '../functions/shared/compression.js';
import { FUNCTION_PROCESS_ENV } from '../lib/infra/service-function.js';
import { NODE22 } from '../lib/local/aws-lambda-ric.js';

const child = `
const zlib = require('node:zlib');
const options = JSON.parse(process.argv[1]);
const chunk = (i) => 'data: ' + JSON.stringify({ id: 'gen-1767225600-AAAAAAAAAAAAAAAAAAAA', object: 'chat.completion.chunk', created: 1767225600, model: 'svc-fast', choices: [{ index: 0, delta: { content: ' word' + (i % 97) }, logprobs: null, finish_reason: null }] }) + '\\n\\n';
async function one(events) {
  const gzip = zlib.createGzip({ ...options, flush: zlib.constants.Z_SYNC_FLUSH });
  let bytes = 0;
  gzip.on('data', (d) => { bytes += d.length; });
  gzip.end(Array.from({ length: events }, (_, i) => chunk(i)).join(''));
  await new Promise((resolve) => gzip.on('end', resolve));
  return { bytes, raw: events * chunk(1).length };
}
(async () => {
  const out = {};
  for (const events of [19, 300]) {
    for (let i = 0; i < 50; i++) await one(events);
    const before = process.cpuUsage();
    let last;
    for (let i = 0; i < 500; i++) last = await one(events);
    const used = process.cpuUsage(before);
    out[events] = { us: (used.user + used.system) / 500, ...last };
  }
  console.log(JSON.stringify(out));
})();
`;

const node = existsSync(NODE22) ? NODE22 : process.execPath;
console.log(`node: ${node === NODE22 ? 'Node 22 (lambda runtime)' : process.version}`);
console.log(
  '| sizes | MALLOC_TRIM_THRESHOLD_ | us per 19-chunk stream | bytes | us per 300-chunk stream | bytes of raw |',
);
console.log('|---|---|---|---|---|---|');
for (const [name, options] of [
  ['zlib defaults', {}],
  ['GZIP_OPTIONS', GZIP_OPTIONS],
] as const) {
  for (const trim of [true, false]) {
    const env = { ...process.env, ...(trim ? FUNCTION_PROCESS_ENV : {}) };
    if (!trim) delete env.MALLOC_TRIM_THRESHOLD_;
    const run = spawnSync(node, ['-e', child, JSON.stringify(options)], { env, encoding: 'utf8' });
    if (run.status !== 0) throw new Error(run.stderr);
    const r = JSON.parse(run.stdout) as Record<string, { us: number; bytes: number; raw: number }>;
    const [short, long] = [r[19], r[300]];
    if (!short || !long) throw new Error(run.stdout);
    console.log(
      `| ${name} | ${trim ? env.MALLOC_TRIM_THRESHOLD_ : 'unset'} | ${short.us.toFixed(0)} | ${short.bytes} | ${long.us.toFixed(0)} | ${long.bytes} of ${long.raw} |`,
    );
  }
}
