/**
 * `npx tsx bench/gzip-paced.ts`: CPU per streamed event of three ways to send an SSE stream, on
 * Node 22 when scripts/install-lambda-runtime.sh has installed it. Each stream writes 300 chunks of
 * ~270 bytes, one every 3 ms (a paced stream: each write wakes the process, as each upstream packet
 * does a function instance), into a PassThrough piped to a sink:
 *
 * - identity: no compression, the floor of the write itself;
 * - node:zlib: `createGzip` with a sync flush per write, which compresses on libuv's thread pool;
 * - gzipStream: functions/shared/compression.ts, which compresses on the writer's thread.
 *
 * CPU is process.cpuUsage (all threads, the pool's too) over the stream's writes. The three run in
 * turn, 15 rounds; prints each way's median and range in microseconds per event, and its bytes.
 */
import { PassThrough, type Readable, Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { constants, createGzip } from 'node:zlib';
import { GZIP_OPTIONS, gzipStream } from '../functions/shared/compression.js';
import { runOnNode22 } from './on-node22.js';
import { sseChunk as chunk } from './sse-chunk.js';

runOnNode22();

const EVENTS = 300;
const GAP_MS = 3;
const ROUNDS = 15;

const ways: Record<string, (source: Readable) => Readable> = {
  identity: (source) => source,
  'node:zlib': (source) => source.pipe(createGzip({ ...GZIP_OPTIONS, flush: constants.Z_SYNC_FLUSH })),
  gzipStream,
};

async function stream(way: (source: Readable) => Readable): Promise<{ us: number; bytes: number }> {
  const source = new PassThrough();
  let bytes = 0;
  const sink = new Writable({
    write(part: Buffer, _encoding, done) {
      bytes += part.length;
      done();
    },
  });
  way(source).pipe(sink);
  await sleep(GAP_MS);
  const before = process.cpuUsage();
  for (let i = 0; i < EVENTS; i++) {
    source.write(chunk(i));
    await sleep(GAP_MS);
  }
  const used = process.cpuUsage(before);
  source.end();
  await new Promise((done) => sink.on('finish', done));
  return { us: (used.user + used.system) / EVENTS, bytes };
}

const results = Object.fromEntries(Object.keys(ways).map((name) => [name, [] as number[]]));
const bytes: Record<string, number> = {};
for (const way of Object.values(ways)) await stream(way); // warm-up, unmeasured
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, way] of Object.entries(ways)) {
    const run = await stream(way);
    results[name]?.push(run.us);
    bytes[name] = run.bytes;
  }
}

console.log(
  `node ${process.version}; ${EVENTS} events of ~${chunk(1).length} bytes, ${GAP_MS} ms apart, ${ROUNDS} rounds`,
);
console.log('| way | us of CPU per event, median | range | bytes sent |');
console.log('|---|---|---|---|');
for (const [name, runs] of Object.entries(results)) {
  const sorted = [...runs].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
  console.log(
    `| ${name} | ${median.toFixed(0)} | ${(sorted[0] ?? 0).toFixed(0)}-${(sorted.at(-1) ?? 0).toFixed(0)} | ${bytes[name]} |`,
  );
}
