/**
 * `npx tsx bench/upstream-read.ts`: what reading a paced upstream event stream costs the reader, per
 * event, through node:http (how functions/adapters/upstream.ts reads an upstream today) against a raw
 * socket whose chunked framing is read by functions/adapters/dynamodb/http1.ts's `ChunkedBody` (what
 * an exchange of our own would do), on Node 22 when scripts/install-lambda-runtime.sh has installed
 * it. The upstream is a node:http server in another process that answers each POST with a chunked
 * `text/event-stream` of 300 events of ~270 bytes, one every 5 ms (one event per packet, as a model
 * streams). The reader's CPU (process.cpuUsage) is counted from its first event to its last; the two
 * readers take turns, one kept-alive connection each, 12 streams each after 2 unmeasured.
 *
 * It measures the read alone (no SSE parsing, no relay), to say whether replacing node:http for the
 * upstream call is worth its risk. It is not, for a stream's events: two runs on 2026-11-25 gave
 * medians of 80 and 82 us per event through node:http against 94 and 93 over the raw socket (its
 * llhttp parser is native; what http1.ts saves the DynamoDB calls is node:http's per-request work).
 */
import { Agent, request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { ChunkedBody } from '../functions/adapters/dynamodb/http1.js';
import { runOnNode22 } from './on-node22.js';
import { startPacedUpstream } from './paced-upstream.js';

runOnNode22();

const EVENTS = 300;
const GAP_MS = 5;
const STREAMS = 12;

const upstream = await startPacedUpstream(EVENTS, GAP_MS);
const { port } = upstream;
const body = JSON.stringify({ model: 'sim-fast', stream: true, messages: [{ role: 'user', content: 'hi' }] });

/** CPU from the first piece to the end, and the pieces seen. */
interface Read {
  cpuUs: number;
  pieces: number;
}

const agent = new Agent({ keepAlive: true, maxSockets: 1 });
function viaNodeHttp(): Promise<Read> {
  return new Promise((resolve, reject) => {
    let start: NodeJS.CpuUsage | undefined;
    let pieces = 0;
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/chat/completions',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        res.on('data', () => {
          start ??= process.cpuUsage();
          pieces += 1;
        });
        res.on('end', () => {
          const used = process.cpuUsage(start);
          resolve({ cpuUs: used.user + used.system, pieces });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

let socket: Socket | undefined;
async function viaRawSocket(): Promise<Read> {
  if (!socket) {
    const fresh = connect({ host: '127.0.0.1', port });
    fresh.setNoDelay(true);
    await new Promise((resolve) => fresh.once('connect', resolve));
    socket = fresh;
  }
  const s = socket;
  return new Promise((resolve) => {
    let start: NodeJS.CpuUsage | undefined;
    let pieces = 0;
    let head: Buffer = Buffer.alloc(0);
    let chunked: ChunkedBody | undefined;
    const onData = (received: Buffer) => {
      let data: Buffer = received;
      start ??= process.cpuUsage();
      pieces += 1;
      if (!chunked) {
        head = head.length === 0 ? data : Buffer.concat([head, data]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        chunked = new ChunkedBody();
        data = head.subarray(end + 4);
      }
      if (chunked.push(data) === 'done') {
        s.off('data', onData);
        const used = process.cpuUsage(start);
        resolve({ cpuUs: used.user + used.system, pieces });
      }
    };
    s.on('data', onData);
    s.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  });
}

const ways = { 'node:http': viaNodeHttp, 'raw socket + ChunkedBody': viaRawSocket };
const results: Record<string, number[]> = { 'node:http': [], 'raw socket + ChunkedBody': [] };
for (const way of Object.values(ways)) for (let i = 0; i < 2; i++) await way();
for (let i = 0; i < STREAMS; i++) {
  for (const [name, way] of Object.entries(ways)) {
    const read = await way();
    results[name]?.push(read.cpuUs / EVENTS);
  }
}
upstream.stop();
socket?.destroy();
agent.destroy();

console.log(
  `node ${process.version}; ${STREAMS} streams each of ${EVENTS} events ${GAP_MS} ms apart, in turn`,
);
console.log('| reader | us of CPU per event, median | range |');
console.log('|---|---|---|');
for (const [name, runs] of Object.entries(results)) {
  const sorted = [...runs].sort((a, b) => a - b);
  console.log(
    `| ${name} | ${(sorted[Math.floor(sorted.length / 2)] ?? 0).toFixed(1)} | ${(sorted[0] ?? 0).toFixed(1)}-${(sorted.at(-1) ?? 0).toFixed(1)} |`,
  );
}
