/**
 * A pass-through HTTP proxy between the benchmarked gateway and DynamoDB Local that counts the
 * capacity units each call consumes (issue 15). It adds `"ReturnConsumedCapacity":"TOTAL"` to every
 * request body that does not set it and adds up the `ConsumedCapacity` DynamoDB Local reports, by
 * operation (the `X-Amz-Target` header). It works whatever thread or process the function code
 * runs in, without touching the adapter; DynamoDB Local does not check request signatures, so the
 * changed body still goes through.
 */
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

interface Capacity {
  CapacityUnits?: number;
  ReadCapacityUnits?: number;
  WriteCapacityUnits?: number;
}

export interface CapacityTotals {
  calls: number;
  readUnits: number;
  writeUnits: number;
  byOperation: Record<string, number>;
}

const READS = new Set(['GetItem', 'BatchGetItem', 'Query', 'Scan', 'TransactGetItems']);

export async function startCapacityProxy(target: string) {
  const upstream = new URL(target);
  const totals: CapacityTotals = { calls: 0, readUnits: 0, writeUnits: 0, byOperation: {} };
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (part: Buffer) => parts.push(part));
    req.on('end', () => {
      let body = Buffer.concat(parts).toString('utf8');
      const operation =
        String(req.headers['x-amz-target'] ?? '')
          .split('.')
          .pop() ?? '';
      if (body.startsWith('{') && !body.includes('"ReturnConsumedCapacity"'))
        body =
          body === '{}'
            ? '{"ReturnConsumedCapacity":"TOTAL"}'
            : `{"ReturnConsumedCapacity":"TOTAL",${body.slice(1)}`;
      const headers = { ...req.headers, 'content-length': String(Buffer.byteLength(body)) };
      const forward = request(
        { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers },
        (answer) => {
          const out: Buffer[] = [];
          answer.on('data', (part: Buffer) => out.push(part));
          answer.on('end', () => {
            const text = Buffer.concat(out);
            try {
              const parsed = JSON.parse(text.toString('utf8')) as {
                ConsumedCapacity?: Capacity | Capacity[];
              };
              const list = Array.isArray(parsed.ConsumedCapacity)
                ? parsed.ConsumedCapacity
                : parsed.ConsumedCapacity
                  ? [parsed.ConsumedCapacity]
                  : [];
              totals.calls += 1;
              totals.byOperation[operation] = (totals.byOperation[operation] ?? 0) + 1;
              for (const entry of list) {
                const units = entry.CapacityUnits ?? 0;
                // DynamoDB Local reports CapacityUnits only; which kind they are follows from the operation.
                totals.readUnits += entry.ReadCapacityUnits ?? (READS.has(operation) ? units : 0);
                totals.writeUnits += entry.WriteCapacityUnits ?? (READS.has(operation) ? 0 : units);
              }
            } catch {
              // not JSON: passed through uncounted
            }
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            res.end(text);
          });
        },
      );
      forward.on('error', () => res.destroy());
      forward.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    totals: (): CapacityTotals => ({ ...totals, byOperation: { ...totals.byOperation } }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
