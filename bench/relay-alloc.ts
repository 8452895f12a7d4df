/**
 * `npx tsx bench/relay-alloc.ts`: bytes allocated on the JS heap per relayed event, and where, on
 * Node 22 when scripts/install-lambda-runtime.sh has installed it. A paced stream (300 events 2 ms
 * apart from a node:http upstream in another process, read over the upstream call's HTTP/1.1 exchange)
 * goes through the relay with gzip inside, as a client of the SDKs gets it (UpstreamBody,
 * UpstreamEvents, the rewrite, SyncGzip), into a sink that drops it. V8's sampling heap profiler (through node:inspector, every 256 bytes on average) counts
 * every allocation, those the young-generation collector has already freed included: what fills the
 * young generation, whose every collection costs a paced stream a burst of CPU. Prints bytes per event
 * in all and the allocation sites that take most of it (function, file:line).
 *
 * The allocations counted are those of the JS heap only: Buffers' memory outside it (the upstream's
 * pieces, zlib's output) is counted by its wrapper objects, not its bytes.
 */
import { Session } from 'node:inspector/promises';
import { Writable } from 'node:stream';
import { SyncGzip } from '../functions/shared/compression.js';
import { runOnNode22 } from './on-node22.js';
import { pacedBodies, startPacedUpstream } from './paced-upstream.js';
import { relayed } from './relayed.js';

runOnNode22();

const EVENTS = 300;
const STREAMS = Number(process.env.STREAMS ?? 5);
const upstream = await startPacedUpstream(EVENTS, 2);
const openBody = pacedBodies(upstream.port);

async function stream(): Promise<void> {
  const out = relayed(await openBody(), EVENTS, new SyncGzip());
  const sink = new Writable({
    write(_piece, _encoding, done) {
      done();
    },
  });
  await new Promise((resolve) => out.pipe(sink).on('finish', resolve));
}

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

for (let i = 0; i < 3; i++) await stream(); // warm-up, unprofiled
const session = new Session();
session.connect();
await session.post('HeapProfiler.startSampling', {
  samplingInterval: 256,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true,
});
for (let i = 0; i < STREAMS; i++) await stream();
const { profile } = (await session.post('HeapProfiler.stopSampling')) as unknown as {
  profile: { head: ProfileNode };
};
session.disconnect();
upstream.stop();

const sites = new Map<string, number>();
let total = 0;
const walk = (node: ProfileNode) => {
  if (node.selfSize > 0) {
    const { functionName, url, lineNumber } = node.callFrame;
    const file = url.replace(/^.*\/(node_modules\/|functions\/|bench\/)/, '$1').replace(/^node:/, '');
    const site = `${functionName || '(anonymous)'} ${file}:${lineNumber + 1}`;
    sites.set(site, (sites.get(site) ?? 0) + node.selfSize);
    total += node.selfSize;
  }
  for (const child of node.children) walk(child);
};
walk(profile.head);
const events = STREAMS * EVENTS;
console.log(
  `node ${process.version}; ${STREAMS} streams of ${EVENTS} events 2 ms apart, relay with gzip inside`,
);
console.log(`JS heap allocated per event: ${(total / events).toFixed(0)} bytes`);
console.log('| site | bytes per event |');
console.log('|---|---|');
for (const [site, bytes] of [...sites].sort((a, b) => b[1] - a[1]).slice(0, 20))
  console.log(`| ${site} | ${(bytes / events).toFixed(0)} |`);
