/**
 * `npx tsx bench/relay-layers.ts`: CPU per event of a paced stream, layer by layer, in one process
 * on Node 22 when scripts/install-lambda-runtime.sh has installed it. The upstream is a node:http
 * server in another process sending a chunked event stream of 300 chunks, one every 5 ms (`GAP_MS`;
 * one event per packet, as a model streams); each way reads it over a kept-alive connection and
 * writes what it has to a counting sink:
 *
 * - floor: the response's pieces written as they come (what a bare proxy does);
 * - body: read through UpstreamBody (adapters/upstream-body.ts);
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
import { UpstreamBody } from '../functions/adapters/upstream-body.js';
import { UpstreamEvents } from '../functions/adapters/upstream-events.js';
import { gzipStream, SyncGzip } from '../functions/shared/compression.js';
import { runOnNode22 } from './on-node22.js';
import { startPacedUpstream } from './paced-upstream.js';
import { relayed } from './relayed.js';

runOnNode22();

const EVENTS = 300;
const GAP_MS = Number(process.env.GAP_MS ?? 5);
const STREAMS = Number(process.env.STREAMS ?? 12);

const upstream = await startPacedUpstream(EVENTS, GAP_MS);
const { port } = upstream;
const agent = new Agent({ keepAlive: true, maxSockets: 1 });

function open(): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', agent }, resolve);
    req.on('error', reject);
    req.end('{}');
  });
}

/** Runs one stream through `consume`; CPU per event from the response's first piece to the sink's end. */
async function measured(consume: (response: IncomingMessage, sink: Writable) => Promise<void> | void) {
  const response = await open();
  let start: NodeJS.CpuUsage | undefined;
  response.once('data', () => {
    start ??= process.cpuUsage();
  });
  const sink = new Writable({
    write(_piece, _encoding, done) {
      done();
    },
  });
  const finished = new Promise((resolve) => sink.on('finish', resolve));
  await consume(response, sink);
  await finished;
  const used = process.cpuUsage(start);
  return (used.user + used.system) / EVENTS;
}

const ways: Record<string, () => Promise<number>> = {
  floor: () =>
    measured((response, sink) => {
      response.on('data', (piece: Buffer) => sink.write(piece));
      response.on('end', () => sink.end());
    }),
  body: () =>
    measured(async (response, sink) => {
      const body = new UpstreamBody(response, 10_000_000);
      for (let piece = await body.read(5_000); piece !== null; piece = await body.read(5_000))
        if (piece !== 'timeout') sink.write(piece);
      sink.end();
    }),
  events: () =>
    measured(async (response, sink) => {
      const events = new UpstreamEvents(new UpstreamBody(response, 10_000_000), 1024 * 1024);
      for (;;) {
        const event = await events.next(5_000);
        if (event === 'timeout' || event.kind !== 'chunk') break;
        sink.write(String(event.chunk.choices.length));
      }
      sink.end();
    }),
  relay: () => measured((response, sink) => void relayed(response, EVENTS).pipe(sink)),
  'relay+gzip': () => measured((response, sink) => void gzipStream(relayed(response, EVENTS)).pipe(sink)),
  'relay, gzip inside': () =>
    measured((response, sink) => void relayed(response, EVENTS, new SyncGzip()).pipe(sink)),
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
