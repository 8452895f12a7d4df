/**
 * `npx tsx bench/relay-layers.ts`: CPU per event of a paced stream, layer by layer, in one process
 * on Node 22 when scripts/install-lambda-runtime.sh has installed it. The upstream is a node:http
 * server in another process sending a chunked event stream of 300 chunks, one every 5 ms (`GAP_MS`;
 * one event per packet, as a model streams); each way reads it over a kept-alive connection and
 * writes what it has to a counting sink:
 *
 * - floor: node:http's response pieces written as they come (what a bare proxy does);
 * - body: read over the upstream call's HTTP/1.1 exchange (adapters/http1.ts) through UpstreamBody
 *   (adapters/upstream-body.ts), as the completions function reads it;
 * - events: through UpstreamEvents too (SSE parsing, each event's JSON parsed and checked);
 * - relay: through the relay (completions/relay.ts: the rewrite, one write per packet);
 * - relay+gzip: and its output through gzipStream (shared/compression.ts) piped after it, as a
 *   client asking gzip got it until 2026-11-25;
 * - relay, gzip inside: the relay compressing its own writes (RelayOptions.compress), as such a client
 *   gets it now.
 *
 * CPU is process.cpuUsage from the first piece to the sink's end; the ways take turns, STREAMS (12)
 * streams each after one unmeasured (WAYS='floor;relay' runs only the ways named). Prints each way's
 * median and lowest, in microseconds per event. No function runtime, no billing: the layers' own
 * share of a paced event.
 */
import { Agent, type IncomingMessage, request } from 'node:http';
import { Writable } from 'node:stream';
import { UpstreamEvents } from '../functions/adapters/upstream-events.js';
import { gzipStream, SyncGzip } from '../functions/shared/compression.js';
import { runOnNode22 } from './on-node22.js';
import { pacedBodies, startPacedUpstream } from './paced-upstream.js';
import { relayed } from './relayed.js';

runOnNode22();

const EVENTS = 300;
const GAP_MS = Number(process.env.GAP_MS ?? 5);
const STREAMS = Number(process.env.STREAMS ?? 12);

const upstream = await startPacedUpstream(EVENTS, GAP_MS);
const { port } = upstream;
const agent = new Agent({ keepAlive: true, maxSockets: 1 });
const openBody = pacedBodies(port);

function open(): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', agent }, resolve);
    req.on('error', reject);
    req.end('{}');
  });
}

/**
 * Runs one stream through `consume`, which opens it and calls `firstPiece` as its first piece
 * arrives; CPU per event from there to the sink's end.
 */
async function measured(consume: (sink: Writable, firstPiece: () => void) => Promise<void> | void) {
  let start: NodeJS.CpuUsage | undefined;
  const firstPiece = () => {
    start ??= process.cpuUsage();
  };
  const sink = new Writable({
    write(_piece, _encoding, done) {
      done();
    },
  });
  const finished = new Promise((resolve) => sink.on('finish', resolve));
  await consume(sink, firstPiece);
  await finished;
  const used = process.cpuUsage(start);
  return (used.user + used.system) / EVENTS;
}

const ways: Record<string, () => Promise<number>> = {
  floor: () =>
    measured(async (sink, firstPiece) => {
      const response = await open();
      response.on('data', (piece: Buffer) => {
        firstPiece();
        sink.write(piece);
      });
      response.on('end', () => sink.end());
    }),
  body: () =>
    measured(async (sink, firstPiece) => {
      const body = await openBody(firstPiece);
      for (let piece = await body.read(5_000); piece !== null; piece = await body.read(5_000))
        if (piece !== 'timeout') sink.write(piece);
      sink.end();
    }),
  events: () =>
    measured(async (sink, firstPiece) => {
      const events = new UpstreamEvents(await openBody(firstPiece), 1024 * 1024);
      for (;;) {
        const event = await events.next(5_000);
        if (event === 'timeout' || event.kind !== 'chunk') break;
        sink.write(String(event.chunk.choices.length));
      }
      sink.end();
    }),
  relay: () =>
    measured(async (sink, firstPiece) => void relayed(await openBody(firstPiece), EVENTS).pipe(sink)),
  'relay+gzip': () =>
    measured(
      async (sink, firstPiece) => void gzipStream(relayed(await openBody(firstPiece), EVENTS)).pipe(sink),
    ),
  'relay, gzip inside': () =>
    measured(
      async (sink, firstPiece) => void relayed(await openBody(firstPiece), EVENTS, new SyncGzip()).pipe(sink),
    ),
};
// WAYS='a;b': only those ways (names as above).
const only = process.env.WAYS?.split(';');
if (only) for (const name of Object.keys(ways)) if (!only.includes(name)) delete ways[name];

const results: Record<string, number[]> = Object.fromEntries(Object.keys(ways).map((name) => [name, []]));
for (const way of Object.values(ways)) await way(); // warm-up, unmeasured
for (let i = 0; i < STREAMS; i++)
  for (const [name, way] of Object.entries(ways)) results[name]?.push(await way());
upstream.stop();
agent.destroy();

console.log(
  `node ${process.version}; ${STREAMS} streams of ${EVENTS} events ${GAP_MS} ms apart per way, in turn`,
);
console.log('| way | us of CPU per event, median | lowest |');
console.log('|---|---|---|');
for (const [name, runs] of Object.entries(results)) {
  const sorted = [...runs].sort((a, b) => a - b);
  console.log(
    `| ${name} | ${(sorted[Math.floor(sorted.length / 2)] ?? 0).toFixed(0)} | ${(sorted[0] ?? 0).toFixed(0)} |`,
  );
}
