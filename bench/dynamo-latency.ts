/**
 * DynamoDB's in-region latency in front of DynamoDB Local, for bench/added-ttfb.ts: a loopback HTTP
 * proxy that forwards each call as it is and holds its answer until a latency drawn for the call's
 * kind has passed since the call arrived (DynamoDB Local's own time counts toward it). DynamoDB Local
 * answers in well under a millisecond of network; a table in AWS, from a function in its region, in
 * single-digit milliseconds (the assumption is stated in docs/performance.md with its source).
 *
 * Each kind's latency is log-normal, fitted to a stated p50 and p99: reads (GetItem, BatchGetItem,
 * Query, TransactGetItems; strongly consistent) and writes (PutItem, UpdateItem, DeleteItem,
 * BatchWriteItem, TransactWriteItems; conditional or not).
 */
import { Agent, createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

interface Latency {
  p50: number;
  p99: number;
}

/** The distributions the bench assumes, ms (docs/performance.md says where they come from). */
export const DYNAMO_LATENCY: { read: Latency; write: Latency } = {
  read: { p50: 3, p99: 8 },
  write: { p50: 5, p99: 12 },
};

const Z99 = 2.3263;

/** A draw from the log-normal with this p50 and p99 (Box-Muller). */
function drawMs({ p50, p99 }: Latency, random = Math.random): number {
  const sigma = Math.log(p99 / p50) / Z99;
  const z = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return p50 * Math.exp(sigma * z);
}

const READS = new Set(['GetItem', 'BatchGetItem', 'Query', 'Scan', 'TransactGetItems', 'DescribeTable']);

export async function startDynamoLatency(
  target: string,
  latency = DYNAMO_LATENCY,
): Promise<{ endpoint: string; calls: Record<string, number>; stop(): Promise<void> }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const upstream = new URL(target);
  const calls: Record<string, number> = {};
  const server: Server = createServer((req, res) => {
    const arrived = performance.now();
    const op = String(req.headers['x-amz-target'] ?? '').split('.')[1] ?? 'other';
    calls[op] = (calls[op] ?? 0) + 1;
    const wait = drawMs(READS.has(op) ? latency.read : latency.write);
    const out = request(
      {
        host: upstream.hostname,
        port: upstream.port,
        path: req.url,
        method: req.method,
        headers: req.headers,
        agent,
      },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => chunks.push(c));
        answer.on('end', () => {
          const left = wait - (performance.now() - arrived);
          const reply = () => {
            res.writeHead(answer.statusCode ?? 500, answer.headers);
            res.end(Buffer.concat(chunks));
          };
          if (left > 0) setTimeout(reply, left);
          else reply();
        });
      },
    );
    out.on('error', (error) => {
      res.writeHead(502);
      res.end(String(error));
    });
    req.pipe(out);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    stop: () =>
      new Promise<void>((done) => {
        agent.destroy();
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}
