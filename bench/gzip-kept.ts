/**
 * `npx tsx bench/gzip-kept.ts`: CPU per compressed short stream, a new compressor for every reply
 * (minizlib's Gzip made, written, ended and closed, as SyncGzip did until 2026-11-26) against
 * SyncGzip (functions/shared/compression.ts), which resets the last reply's compressor and keeps it.
 * On Node 22 with the functions' MALLOC_TRIM_THRESHOLD_ when scripts/install-lambda-runtime.sh has
 * installed it. A reply is 19 SSE chunks written one by one and the member's end; one reply every
 * GAP_MS (5) ms, as an instance between invocations; the two ways take turns, ROUNDS (8) rounds of
 * 100 replies. Prints each way's median and lowest in microseconds per reply, and its bytes.
 */
import { constants } from 'node:zlib';
import { Gzip } from 'minizlib';
import { GZIP_OPTIONS, SyncGzip } from '../functions/shared/compression.js';
import { FUNCTION_PROCESS_ENV } from '../lib/infra/service-function.js';
import { runOnNode22 } from './on-node22.js';
import { pacedCpuUs } from './paced-cpu.js';
import { sseChunk as chunk } from './sse-chunk.js';

Object.assign(process.env, FUNCTION_PROCESS_ENV);
runOnNode22();

const GAP_MS = Number(process.env.GAP_MS ?? 5);
const ROUNDS = Number(process.env.ROUNDS ?? 8);
const PER_ROUND = 100;

const CHUNKS = Array.from({ length: 19 }, (_, i) => chunk(i));

function newEachTime(): number {
  const gzip = new Gzip({ ...GZIP_OPTIONS, flush: constants.Z_SYNC_FLUSH });
  let bytes = 0;
  gzip.on('data', (segment: Buffer) => {
    bytes += segment.length;
  });
  for (const text of CHUNKS) gzip.write(text);
  gzip.end();
  gzip.close();
  return bytes;
}

function kept(): number {
  const gzip = new SyncGzip();
  let bytes = 0;
  for (const text of CHUNKS) bytes += gzip.write(text).length;
  return bytes + gzip.end().length;
}

const ways: Record<string, () => number> = {
  'a new compressor each reply': newEachTime,
  'SyncGzip, kept': kept,
};
const results: Record<string, { us: number[]; bytes: number }> = {};
for (const name of Object.keys(ways)) results[name] = { us: [], bytes: 0 };
for (let r = 0; r < ROUNDS; r++)
  for (const [name, reply] of Object.entries(ways)) {
    const { us, last } = await pacedCpuUs(reply, GAP_MS, PER_ROUND);
    const result = results[name];
    if (result) {
      result.us.push(us);
      result.bytes = last ?? 0;
    }
  }

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? Number.NaN;
console.log(
  `Node ${process.version}, MALLOC_TRIM_THRESHOLD_=${process.env.MALLOC_TRIM_THRESHOLD_ ?? 'unset'}; a 19-chunk reply every ${GAP_MS} ms`,
);
console.log('| way | us per reply, median | lowest | bytes |');
console.log('|---|---|---|---|');
for (const [name, { us, bytes }] of Object.entries(results))
  console.log(`| ${name} | ${median(us).toFixed(0)} | ${Math.min(...us).toFixed(0)} | ${bytes} |`);
