/**
 * A split account's total read as of one instant (adapters/dynamodb/slices.ts): one TransactGetItems
 * of the account item and every slice, sent again while DynamoDB cancels it for a write in flight on
 * one of them (`TransactionConflict`), but never past the caller's deadline; read again with the new
 * slices when a split committed between the slice count's read and the snapshot.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterEach, describe, expect, it } from 'vitest';
import { Slices } from '../../../functions/adapters/dynamodb/slices.js';
import { DynamoWire } from '../../../functions/adapters/dynamodb/wire.js';

const TIMEOUTS = { connectTimeoutMs: 500, requestTimeoutMs: 1_000, maxAttempts: 1 };
const TABLES = { keys: 'k', accounts: 'a', ledger: 'l', holds: 'h' };

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((done) => server?.close(done) ?? done(undefined));
  server = undefined;
});

type Item = Record<string, { S?: string; N?: string }>;

/**
 * A DynamoDB whose account items are `items` (by key): GetItem answers them, TransactGetItems is
 * cancelled for a conflict `conflicts()` times more, then answers them. Counts the TransactGetItems.
 */
async function fakeDynamo(items: () => Map<string, Item>, conflicts: () => boolean) {
  const calls: string[] = [];
  const fake = createServer((request, response) => {
    let text = '';
    request.on('data', (chunk: Buffer) => {
      text += chunk.toString();
    });
    request.on('end', () => {
      const operation = String(request.headers['x-amz-target']).split('.')[1] ?? '';
      const body = JSON.parse(text) as {
        Key?: Item;
        TransactItems?: { Get: { Key: Item } }[];
      };
      calls.push(operation);
      const answer = (status: number, json: unknown) => {
        response.writeHead(status, { 'content-type': 'application/x-amz-json-1.0' });
        response.end(JSON.stringify(json));
      };
      if (operation === 'GetItem') {
        const item = items().get(body.Key?.accountId?.S ?? '');
        return answer(200, item ? { Item: item } : {});
      }
      if (operation === 'TransactGetItems') {
        const gets = body.TransactItems ?? [];
        if (conflicts())
          return answer(400, {
            __type: 'com.amazonaws.dynamodb.v20120810#TransactionCanceledException',
            Message: 'Transaction cancelled, please refer cancellation reasons for specific reasons',
            CancellationReasons: gets.map((_, i) =>
              i === gets.length - 1
                ? { Code: 'TransactionConflict', Message: 'Transaction is ongoing for the item' }
                : { Code: 'None' },
            ),
          });
        return answer(200, {
          Responses: gets.map((get) => {
            const item = items().get(get.Get.Key.accountId?.S ?? '');
            return item ? { Item: item } : {};
          }),
        });
      }
      answer(400, { __type: 'com.amazon.coral.validate#ValidationException', message: operation });
    });
  });
  server = fake;
  await new Promise<void>((done) => fake.listen(0, '127.0.0.1', done));
  const endpoint = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
  const client = new DynamoDBClient({
    endpoint,
    region: 'eu-west-1',
    credentials: { accessKeyId: 'AKIDTEST', secretAccessKey: 'secret' },
    maxAttempts: 1,
  });
  const slices = new Slices({ client, tables: TABLES, wire: new DynamoWire(client, TIMEOUTS) });
  return { client, slices, snapshots: () => calls.filter((c) => c === 'TransactGetItems').length };
}

const slice = (key: string, balance: number, extra: Item = {}): [string, Item] => [
  key,
  { accountId: { S: key }, creditBalance: { N: String(balance) }, heldNano: { N: '0' }, ...extra },
];

describe("a split account's total", () => {
  it('is read in one TransactGetItems, sent again while DynamoDB cancels it for a conflict', async () => {
    const items = new Map([
      slice('acct', 100, { slices: { N: '3' }, status: { S: 'active' } }),
      slice('acct#1', 20),
      slice('acct#2', 3),
    ]);
    let cancelled = 0;
    const dynamo = await fakeDynamo(
      () => items,
      () => cancelled++ < 3,
    );
    const account = await dynamo.slices.account('acct');
    expect(account).toMatchObject({ accountId: 'acct', balanceNano: 123n, heldNano: 0n, slices: 3 });
    expect(dynamo.snapshots()).toBe(4);
    dynamo.client.destroy();
  });

  it('gives up by the deadline while the items stay in transactions', async () => {
    const items = new Map([slice('acct', 100, { slices: { N: '2' } }), slice('acct#1', 20)]);
    const dynamo = await fakeDynamo(
      () => items,
      () => true,
    );
    const started = Date.now();
    const failure = await dynamo.slices
      .account('acct', { deadline: started + 300 })
      .catch((error: unknown) => error);
    expect(failure).toMatchObject({ name: 'TransactionCanceledException' });
    expect(Date.now() - started).toBeLessThan(300 + 200);
    expect(dynamo.snapshots()).toBeGreaterThan(1);
    dynamo.client.destroy();
  });

  it('reads the new slices too when a split committed after the slice count was read', async () => {
    const before = new Map([slice('acct', 100, { slices: { N: '2' } }), slice('acct#1', 20)]);
    const after = new Map([
      slice('acct', 100, { slices: { N: '3' } }),
      slice('acct#1', 15),
      // What the split's rebalance moved to its new slice.
      slice('acct#2', 5),
    ]);
    let reads = 0;
    const dynamo = await fakeDynamo(
      () => (reads++ === 0 ? before : after),
      () => false,
    );
    expect((await dynamo.slices.account('acct'))?.balanceNano).toBe(120n);
    expect(dynamo.snapshots()).toBe(2);
    dynamo.client.destroy();
  });

  it('is one GetItem for an account that is not split', async () => {
    const items = new Map([slice('acct', 100)]);
    const dynamo = await fakeDynamo(
      () => items,
      () => true,
    );
    expect((await dynamo.slices.account('acct'))?.balanceNano).toBe(100n);
    expect(dynamo.snapshots()).toBe(0);
    expect(await dynamo.slices.account('nobody')).toBeUndefined();
    dynamo.client.destroy();
  });
});
