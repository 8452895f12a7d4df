import { randomBytes } from 'node:crypto';
import { UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { ensureTables, localClient } from '../../lib/local/dynamodb-local.js';
import { localTableNames } from '../../lib/local/stack.js';

/** The scheduled balance check (the sweeper's `{"check": "balances"}` run) against DynamoDB Local. */
const tables = localTableNames(`bal${randomBytes(3).toString('hex')}-`);
const client = localClient(inject('dynamoEndpoint'));
const store = new DynamoStore(client, tables);

beforeAll(async () => {
  await ensureTables(client, tables);
});

describe('countNegativeBalances', () => {
  it('counts exactly the accounts below zero, across scan pages', async () => {
    expect(await store.countNegativeBalances()).toBe(0);
    const now = new Date().toISOString();
    for (let i = 0; i < 30; i++) await store.createAccount(`acct-${i}`, 1_000n, now);
    for (const [i, balance] of [
      [3, -1],
      [7, -1_000_000],
      [11, 0],
    ] as const) {
      await client.send(
        new UpdateItemCommand({
          TableName: tables.accounts,
          Key: { accountId: { S: `acct-${i}` } },
          UpdateExpression: 'SET creditBalance = :b',
          ExpressionAttributeValues: { ':b': { N: String(balance) } },
        }),
      );
    }
    expect(await store.countNegativeBalances()).toBe(2);
  });
});
