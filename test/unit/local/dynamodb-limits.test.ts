import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  CONFLICT_MESSAGE,
  type DynamoLimits,
  type LimitsOptions,
  startDynamoLimits,
  stretchMs,
  THROTTLE_MESSAGE,
} from '../../../lib/local/dynamodb-limits.js';
import { itemSize, readUnits, writeUnits } from '../../../lib/local/dynamodb-units.js';

/**
 * The limits layer against DynamoDB's documented behaviour, in front of the real DynamoDB Local the
 * suite runs. Calls go over the wire as DynamoDB's JSON protocol, so every assertion is on what a client
 * would receive. The buckets refill on a clock the tests move; a write's hold ends when the test says.
 */
const target = () => inject('dynamoEndpoint');
const table = `limits-${randomBytes(4).toString('hex')}`;
const S = (value: string) => ({ S: value });

interface Reply {
  status: number;
  body: Record<string, unknown> & {
    __type?: string;
    message?: string;
    CancellationReasons?: { Code: string; Message?: string }[];
  };
}

async function call(endpoint: string, operation: string, body: object): Promise<Reply> {
  const response = await fetch(endpoint, {
    method: 'POST',
    headers: {
      'x-amz-target': `DynamoDB_20120810.${operation}`,
      'content-type': 'application/x-amz-json-1.0',
      authorization:
        'AWS4-HMAC-SHA256 Credential=local/20260101/local/dynamodb/aws4_request, SignedHeaders=host, Signature=0',
    },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Reply['body'] };
}

/** A layer with its own clock and a switch that keeps writes held until released. */
async function layer(options: Partial<LimitsOptions> = {}) {
  let clock = 1_000_000;
  let holding = false;
  const held: (() => void)[] = [];
  const waiting: ((count: number) => void)[] = [];
  const limits = await startDynamoLimits({
    target: target(),
    now: () => clock,
    hold: () => {
      if (!holding) return Promise.resolve();
      return new Promise<void>((resolve) => {
        held.push(resolve);
        for (const notify of waiting.splice(0)) notify(held.length);
      });
    },
    ...options,
  });
  return {
    limits,
    call: (operation: string, body: object) => call(limits.endpoint, operation, body),
    advance: (ms: number) => {
      clock += ms;
    },
    holdWrites: () => {
      holding = true;
    },
    /** Resolves once `count` writes are being held. */
    heldCount: (count: number) =>
      new Promise<void>((resolve) => {
        if (held.length >= count) return resolve();
        const check = (n: number) => (n >= count ? resolve() : waiting.push(check));
        waiting.push(check);
      }),
    release: () => {
      holding = false;
      for (const resolve of held.splice(0)) resolve();
    },
  };
}

const partition = (limits: DynamoLimits, pk: string) =>
  limits.metrics().partitions.find((p) => p.table === table && p.key === JSON.stringify(S(pk)));

beforeAll(async () => {
  const created = await call(target(), 'CreateTable', {
    TableName: table,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [
      { AttributeName: 'pk', AttributeType: 'S' },
      { AttributeName: 'sk', AttributeType: 'S' },
    ],
    KeySchema: [
      { AttributeName: 'pk', KeyType: 'HASH' },
      { AttributeName: 'sk', KeyType: 'RANGE' },
    ],
  });
  expect(created.status).toBe(200);
});

let open: DynamoLimits[] = [];
afterAll(async () => {
  for (const limits of open) await limits.close();
  open = [];
});
async function fresh(options: Partial<LimitsOptions> = {}) {
  const made = await layer(options);
  open.push(made.limits);
  return made;
}

const item = (pk: string, sk: string, bytes = 0) => ({
  pk: S(pk),
  sk: S(sk),
  ...(bytes ? { v: S('x'.repeat(bytes)) } : {}),
});

describe('capacity units, from the sizes DynamoDB uses', () => {
  it('charges a write 1 unit per KB of the item, an update the larger of before and after, a transaction double', async () => {
    const { limits, call } = await fresh();
    // 1,500 bytes of value plus the names and keys: 2 units.
    expect((await call('PutItem', { TableName: table, Item: item('w1', 'a', 1500) })).status).toBe(200);
    expect(partition(limits, 'w1')?.writeUnits).toBe(2);
    // A small change to a 1.5 KB item costs what the item before it costs.
    await call('UpdateItem', {
      TableName: table,
      Key: { pk: S('w1'), sk: S('a') },
      UpdateExpression: 'SET n = :n',
      ExpressionAttributeValues: { ':n': { N: '1' } },
    });
    expect(partition(limits, 'w1')?.writeUnits).toBe(4);
    // REMOVE leaves a small item; the cost is still the larger, before.
    await call('UpdateItem', {
      TableName: table,
      Key: { pk: S('w1'), sk: S('a') },
      UpdateExpression: 'REMOVE v',
    });
    expect(partition(limits, 'w1')?.writeUnits).toBe(6);
    // The same kind of update in a transaction: 1 unit, doubled.
    const tx = await call('TransactWriteItems', {
      TransactItems: [
        {
          Update: {
            TableName: table,
            Key: { pk: S('w1'), sk: S('a') },
            UpdateExpression: 'SET n = :n',
            ExpressionAttributeValues: { ':n': { N: '2' } },
          },
        },
      ],
    });
    expect(tx.status).toBe(200);
    expect(partition(limits, 'w1')?.writeUnits).toBe(8);
    // The caller did not ask for ConsumedCapacity: the answer does not carry it.
    expect(tx.body.ConsumedCapacity).toBeUndefined();
  });

  it('charges a write whose condition fails (at least 1 unit), and a cancelled transaction its doubled units', async () => {
    const { limits, call } = await fresh();
    await call('PutItem', { TableName: table, Item: item('c1', 'a', 1500) });
    const failed = await call('PutItem', {
      TableName: table,
      Item: item('c1', 'a'),
      ConditionExpression: 'attribute_not_exists(pk)',
    });
    expect(failed.body.__type).toBe('com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException');
    expect(partition(limits, 'c1')?.writeUnits).toBe(4);
    const cancelled = await call('TransactWriteItems', {
      TransactItems: [
        { Put: { TableName: table, Item: item('c2', 'a'), ConditionExpression: 'attribute_not_exists(pk)' } },
        { Put: { TableName: table, Item: item('c1', 'a'), ConditionExpression: 'attribute_not_exists(pk)' } },
      ],
    });
    expect(cancelled.body.__type).toBe('com.amazonaws.dynamodb.v20120810#TransactionCanceledException');
    expect(partition(limits, 'c1')?.writeUnits).toBe(8);
    expect(partition(limits, 'c2')?.writeUnits).toBe(2);
  });

  it('charges a read 1 unit per 4 KB strongly consistent, half that eventually consistent, double in a transaction', async () => {
    const { limits, call } = await fresh();
    await call('PutItem', { TableName: table, Item: item('r1', 'a', 5000) });
    const key = { pk: S('r1'), sk: S('a') };
    await call('GetItem', { TableName: table, Key: key, ConsistentRead: true });
    expect(partition(limits, 'r1')?.readUnits).toBe(2);
    await call('GetItem', { TableName: table, Key: key });
    expect(partition(limits, 'r1')?.readUnits).toBe(3);
    await call('TransactGetItems', { TransactItems: [{ Get: { TableName: table, Key: key } }] });
    expect(partition(limits, 'r1')?.readUnits).toBe(7);
    // BatchGetItem: each item on its own (a missing item still costs the minimum).
    await call('BatchGetItem', {
      RequestItems: { [table]: { Keys: [key, { pk: S('r1'), sk: S('missing') }], ConsistentRead: true } },
    });
    expect(partition(limits, 'r1')?.readUnits).toBe(10);
  });

  it('gives the units back when DynamoDB refuses the call for another reason', async () => {
    const { limits, call } = await fresh();
    const invalid = await call('UpdateItem', {
      TableName: table,
      Key: { pk: S('v1'), sk: S('a') },
      UpdateExpression: 'SET n = :missing',
    });
    expect(invalid.body.__type).toContain('ValidationException');
    expect(partition(limits, 'v1')?.writeUnits).toBe(0);
  });
});

describe('throttling, as an on-demand table answers it', () => {
  it('refuses a partition past its write units a second with ThrottlingException, other partitions unaffected', async () => {
    // Scale 100: 10 write units a second per partition.
    const { limits, call, advance } = await fresh({ scale: 100 });
    for (let i = 0; i < 10; i++)
      expect((await call('PutItem', { TableName: table, Item: item('t1', `${i}`) })).status).toBe(200);
    const refused = await call('PutItem', { TableName: table, Item: item('t1', 'over') });
    expect(refused.status).toBe(400);
    expect(refused.body.__type).toBe('com.amazonaws.dynamodb.v20120810#ThrottlingException');
    expect(refused.body.message).toBe(THROTTLE_MESSAGE);
    expect(refused.body.ThrottlingReasons).toEqual([
      { reason: 'TableWriteKeyRangeThroughputExceeded', resource: expect.stringContaining(`table/${table}`) },
    ]);
    // Refused means not written.
    const read = await call('GetItem', { TableName: table, Key: { pk: S('t1'), sk: S('over') } });
    expect(read.body.Item).toBeUndefined();
    expect((await call('PutItem', { TableName: table, Item: item('t2', 'a') })).status).toBe(200);
    // A tenth of a second later, one unit has come back, and one only.
    advance(100);
    expect((await call('PutItem', { TableName: table, Item: item('t1', 'later') })).status).toBe(200);
    expect((await call('PutItem', { TableName: table, Item: item('t1', 'later2') })).status).toBe(400);
    const metrics = limits.metrics();
    expect(metrics.writeLimitPerSecond).toBe(10);
    // The bucket holds one second of units and refills continuously: the clock second in which it
    // refills carries the refill too (a token bucket's peak in any one second is up to twice its rate).
    expect(partition(limits, 't1')).toMatchObject({ peakWritePerSecond: 11, throttled: 2 });
    expect(metrics.throttles.PutItem).toBe(2);
  });

  it('answers a throttled transaction item with ThrottlingError among its cancellation reasons', async () => {
    const { call } = await fresh({ scale: 100 });
    // 5 transactional writes of 1 unit each use the 10 units of t3.
    for (let i = 0; i < 5; i++)
      await call('TransactWriteItems', {
        TransactItems: [{ Put: { TableName: table, Item: item('t3', `${i}`) } }],
      });
    const refused = await call('TransactWriteItems', {
      TransactItems: [
        { Put: { TableName: table, Item: item('t4', 'a') } },
        { Put: { TableName: table, Item: item('t3', 'over') } },
      ],
    });
    expect(refused.body.__type).toBe('com.amazonaws.dynamodb.v20120810#TransactionCanceledException');
    expect(refused.body.CancellationReasons).toEqual([
      { Code: 'None' },
      { Code: 'ThrottlingError', Message: THROTTLE_MESSAGE },
    ]);
    // All or nothing: the other item was not written.
    const read = await call('GetItem', { TableName: table, Key: { pk: S('t4'), sk: S('a') } });
    expect(read.body.Item).toBeUndefined();
  });

  it('returns the throttled keys of a BatchGetItem as UnprocessedKeys, and throttles it whole when none can be read', async () => {
    // Scale 100: 30 read units a second per partition.
    const { call } = await fresh({ scale: 100 });
    await call('PutItem', { TableName: table, Item: item('b1', 'a') });
    await call('PutItem', { TableName: table, Item: item('b2', 'a') });
    const hot = { pk: S('b1'), sk: S('a') };
    const cold = { pk: S('b2'), sk: S('a') };
    for (let i = 0; i < 30; i++) await call('GetItem', { TableName: table, Key: hot, ConsistentRead: true });
    const partial = await call('BatchGetItem', {
      RequestItems: { [table]: { Keys: [hot, cold], ConsistentRead: true } },
    });
    expect(partial.status).toBe(200);
    expect((partial.body.Responses as Record<string, unknown[]>)[table]).toEqual([item('b2', 'a')]);
    expect(partial.body.UnprocessedKeys).toEqual({ [table]: { Keys: [hot], ConsistentRead: true } });
    const whole = await call('BatchGetItem', {
      RequestItems: { [table]: { Keys: [hot], ConsistentRead: true } },
    });
    expect(whole.status).toBe(400);
    expect(whole.body.__type).toBe('com.amazonaws.dynamodb.v20120810#ThrottlingException');
    expect(whole.body.ThrottlingReasons).toEqual([
      { reason: 'TableReadKeyRangeThroughputExceeded', resource: expect.stringContaining(table) },
    ]);
  });
});

describe('transaction conflicts', () => {
  it('cancels a transaction on a held item (TransactionConflict there, None elsewhere), refuses a plain write, serves reads', async () => {
    const { limits, call, holdWrites, heldCount, release } = await fresh();
    await call('PutItem', { TableName: table, Item: { ...item('x1', 'account'), n: { N: '0' } } });
    holdWrites();
    const add = (entry: string) => ({
      TransactItems: [
        {
          Put: { TableName: table, Item: item('x1', entry), ConditionExpression: 'attribute_not_exists(pk)' },
        },
        {
          Update: {
            TableName: table,
            Key: { pk: S('x1'), sk: S('account') },
            UpdateExpression: 'ADD n :one',
            ExpressionAttributeValues: { ':one': { N: '1' } },
          },
        },
      ],
    });
    const first = call('TransactWriteItems', add('e1'));
    await heldCount(1);
    const second = await call('TransactWriteItems', add('e2'));
    expect(second.status).toBe(400);
    expect(second.body.__type).toBe('com.amazonaws.dynamodb.v20120810#TransactionCanceledException');
    expect(second.body.CancellationReasons).toEqual([
      { Code: 'None' },
      { Code: 'TransactionConflict', Message: CONFLICT_MESSAGE },
    ]);
    const plain = await call('UpdateItem', {
      TableName: table,
      Key: { pk: S('x1'), sk: S('account') },
      UpdateExpression: 'ADD n :one',
      ExpressionAttributeValues: { ':one': { N: '1' } },
    });
    expect(plain.status).toBe(400);
    expect(plain.body.__type).toBe('com.amazonaws.dynamodb.v20120810#TransactionConflictException');
    const transactionalRead = await call('TransactGetItems', {
      TransactItems: [{ Get: { TableName: table, Key: { pk: S('x1'), sk: S('account') } } }],
    });
    expect(transactionalRead.body.CancellationReasons).toEqual([
      { Code: 'TransactionConflict', Message: CONFLICT_MESSAGE },
    ]);
    // Plain reads are served: the last committed value, the first transaction's whole or nothing of it.
    const read = await call('BatchGetItem', {
      RequestItems: {
        [table]: {
          Keys: [
            { pk: S('x1'), sk: S('account') },
            { pk: S('x1'), sk: S('e1') },
          ],
          ConsistentRead: true,
        },
      },
    });
    expect(read.status).toBe(200);
    const seen =
      (read.body.Responses as Record<string, { sk: { S: string }; n?: { N: string } }[]>)[table] ?? [];
    const account = seen.find((i) => i.sk.S === 'account');
    expect(account?.n?.N === '1').toBe(seen.some((i) => i.sk.S === 'e1'));
    release();
    expect((await first).status).toBe(200);
    // Released: the same transaction now commits.
    expect((await call('TransactWriteItems', add('e2'))).status).toBe(200);
    expect(limits.metrics().conflicts).toEqual({ cancelledTransactions: 2, conflictExceptions: 1 });
  });

  it('cancels a transaction that includes an item a plain write is writing', async () => {
    const { call, holdWrites, heldCount, release } = await fresh();
    holdWrites();
    const plain = call('PutItem', { TableName: table, Item: item('y1', 'a') });
    await heldCount(1);
    const tx = await call('TransactWriteItems', {
      TransactItems: [
        { Put: { TableName: table, Item: item('y2', 'a') } },
        { Put: { TableName: table, Item: item('y1', 'a') } },
      ],
    });
    expect(tx.body.CancellationReasons?.map((r) => r.Code)).toEqual(['None', 'TransactionConflict']);
    release();
    expect((await plain).status).toBe(200);
  });

  it('holds a write k times its time in DynamoDB Local: its time there plus (k - 1) times that', () => {
    expect(stretchMs(1, 7)).toBe(0);
    expect(stretchMs(25, 4)).toBe(96);
    // Local slowed by a busy machine is not a slower DynamoDB: held k x 10 ms in all, at most.
    expect(stretchMs(25, 40)).toBe(210);
    expect(stretchMs(2, 30)).toBe(0);
  });
});

describe('item sizes, as AWS documents them', () => {
  it('adds attribute names and values: strings by UTF-8 bytes, numbers by significant digits, nesting overhead', () => {
    // "pk" (2) + "acct" (4); "n" (1) + 12345 (5 digits: 3 + 1); "é" is 2 bytes in UTF-8.
    expect(itemSize({ pk: { S: 'acct' }, n: { N: '123.45' } })).toBe(6 + 1 + 4);
    expect(itemSize({ s: { S: 'é' } })).toBe(1 + 2);
    // Leading and trailing zeroes are trimmed.
    expect(itemSize({ n: { N: '000120000' } })).toBe(1 + 2);
    // A map: 3 bytes plus 1 per element plus the elements; null and boolean 1 byte.
    expect(itemSize({ m: { M: { a: { BOOL: true }, b: { NULL: true } } } })).toBe(1 + 3 + (1 + 1 + 1) * 2);
  });

  it('turns sizes into units: 1 KB a write unit, 4 KB a read unit, half eventually consistent, double in transactions', () => {
    expect([writeUnits(0), writeUnits(1024), writeUnits(1025), writeUnits(1025, true)]).toEqual([1, 1, 2, 4]);
    expect([
      readUnits(0, true),
      readUnits(4097, true),
      readUnits(4097, false),
      readUnits(4097, true, true),
    ]).toEqual([1, 2, 1, 4]);
  });
});
