/**
 * `npx tsx bench/upstream-read.ts`: what reading a paced upstream event stream costs the reader, per
 * event, through the upstream call's HTTP/1.1 exchange (functions/adapters/http1.ts's `open`, how
 * functions/adapters/upstream.ts reads an upstream since 2026-11-26) against node:http (how it read
 * one before), on Node 22 when scripts/install-lambda-runtime.sh has installed it. The upstream is a
 * node:http server in another process that answers each POST with a chunked `text/event-stream` of
 * 300 events of ~270 bytes, one every 5 ms (one event per packet, as a model streams). The reader's
 * CPU (process.cpuUsage) is counted from its first event to its last; the two readers take turns, one
 * kept-alive connection each, 12 streams each after 2 unmeasured. The read alone: no SSE parsing, no
 * relay. `UPSTREAM_TLS=1` reads it over https (a certificate made for the run), as providers are
 * called. On 2026-11-26: 91 against 96 us per event (83 against 103 with the test suite running beside
 * it); over https 103 against 112, 93 against 87 and 82 against 82; on 2026-11-25 a raw socket read by
 * the chunked reader of the time measured 94 and 93 against node:http's 80 and 82.
 */
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { Http1Client } from '../functions/adapters/http1.js';
import { selfSignedCertificate } from '../test/support/certificate.js';
import { runOnNode22 } from './on-node22.js';
import { startPacedUpstream } from './paced-upstream.js';

runOnNode22();

const EVENTS = 300;
const GAP_MS = 5;
const STREAMS = 12;

// UPSTREAM_TLS=1: over https (as a provider is called), with a certificate made here for the run.
const tls = process.env.UPSTREAM_TLS ? selfSignedCertificate() : undefined;
const upstream = await startPacedUpstream(EVENTS, GAP_MS, tls);
const { port } = upstream;

const body = JSON.stringify({ model: 'sim-fast', stream: true, messages: [{ role: 'user', content: 'hi' }] });

/** CPU from the first piece to the end, and the pieces seen. */
interface Read {
  cpuUs: number;
  pieces: number;
}

const agent = tls
  ? new HttpsAgent({ keepAlive: true, maxSockets: 1, ca: tls.cert })
  : new HttpAgent({ keepAlive: true, maxSockets: 1 });
const request = tls ? httpsRequest : httpRequest;
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

const client = new Http1Client(
  { protocol: tls ? 'https:' : 'http:', hostname: '127.0.0.1', port, ...(tls ? { ca: tls.cert } : {}) },
  { connectTimeoutMs: 5_000, silenceMs: 0 },
);
function viaHttp1(): Promise<Read> {
  return new Promise((resolve, reject) => {
    let start: NodeJS.CpuUsage | undefined;
    let pieces = 0;
    const head = `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`;
    client
      .open(head, body, 5_000, () => ({
        piece: () => {
          start ??= process.cpuUsage();
          pieces += 1;
        },
        end: () => {
          const used = process.cpuUsage(start);
          resolve({ cpuUs: used.user + used.system, pieces });
        },
        fail: reject,
      }))
      .catch(reject);
  });
}

const ways = { 'node:http': viaNodeHttp, 'http1.ts (open)': viaHttp1 };
const results: Record<string, number[]> = { 'node:http': [], 'http1.ts (open)': [] };
for (const way of Object.values(ways)) for (let i = 0; i < 2; i++) await way();
for (let i = 0; i < STREAMS; i++) {
  for (const [name, way] of Object.entries(ways)) {
    const read = await way();
    results[name]?.push(read.cpuUs / EVENTS);
  }
}
upstream.stop();
client.close();
agent.destroy();

console.log(
  `node ${process.version}; ${STREAMS} streams each of ${EVENTS} events ${GAP_MS} ms apart, in turn, over ${tls ? 'https' : 'http'}`,
);
console.log('| reader | us of CPU per event, median | range |');
console.log('|---|---|---|');
for (const [name, runs] of Object.entries(results)) {
  const sorted = [...runs].sort((a, b) => a - b);
  console.log(
    `| ${name} | ${(sorted[Math.floor(sorted.length / 2)] ?? 0).toFixed(1)} | ${(sorted[0] ?? 0).toFixed(1)}-${(sorted.at(-1) ?? 0).toFixed(1)} |`,
  );
}
