/**
 * `npx tsx bench/gzip-binding.ts`: CPU per sync-flushed write of one SSE chunk, paced GAP_MS (5) ms
 * apart as a streamed event is, through minizlib's Gzip (which drove SyncGzip until 2026-11-26)
 * against SyncGzip (functions/shared/compression.ts), which drives zlib's binding itself. On Node 22
 * with the functions' MALLOC_TRIM_THRESHOLD_ when scripts/install-lambda-runtime.sh has installed it.
 * One compressor per way for the whole run (as a kept one); the ways take turns, ROUNDS (6) rounds of
 * 300 writes. First checks that both write the same bytes. Prints each way's median and lowest in
 * microseconds per write.
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
const ROUNDS = Number(process.env.ROUNDS ?? 6);
const PER_ROUND = 300;

/** minizlib's Gzip written as SyncGzip wrote it: its output arrives inside its own write. */
function minizlibWriter(): (text: string) => Buffer {
  const gzip = new Gzip({ ...GZIP_OPTIONS, flush: constants.Z_SYNC_FLUSH });
  let out: Buffer[] = [];
  gzip.on('data', (segment: Buffer) => out.push(segment));
  return (text) => {
    gzip.write(text);
    const written = out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out);
    out = [];
    return written;
  };
}

const binding = new SyncGzip();
const ways: Record<string, (text: string) => Buffer> = {
  minizlib: minizlibWriter(),
  'SyncGzip (the binding)': (text) => binding.write(text),
};

const check = [minizlibWriter(), new SyncGzip()] as const;
for (let i = 0; i < 500; i++)
  if (!check[0](chunk(i)).equals(check[1].write(chunk(i)))) throw new Error(`the ways differ at write ${i}`);

const results: Record<string, number[]> = Object.fromEntries(Object.keys(ways).map((name) => [name, []]));
for (let r = 0; r < ROUNDS; r++)
  for (const [name, write] of Object.entries(ways))
    results[name]?.push((await pacedCpuUs((i) => write(chunk(i)), GAP_MS, PER_ROUND)).us);

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? Number.NaN;
console.log(
  `Node ${process.version}, MALLOC_TRIM_THRESHOLD_=${process.env.MALLOC_TRIM_THRESHOLD_ ?? 'unset'}; one write every ${GAP_MS} ms; the same bytes both ways (500 writes compared)`,
);
console.log('| way | us per write, median | lowest |');
console.log('|---|---|---|');
for (const [name, us] of Object.entries(results))
  console.log(`| ${name} | ${median(us).toFixed(0)} | ${Math.min(...us).toFixed(0)} |`);
