/**
 * The Activity page's per-key totals (store.keysUsage) against DynamoDB Local: the same DynamoDB calls
 * for one key as for eight, on an unsplit account and on a split one, and each total equal to the
 * key's own keyUsage.
 */
import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { ensureTables, localClient } from '../../lib/local/dynamodb-local.js';
import { localTableNames } from '../../lib/local/stack.js';
import { watchDynamoCalls } from '../support/dynamo-calls.js';
import { accountWith, chargeEntry, keyFor } from '../support/fixtures.js';

const tables = localTableNames(`keyusage${randomBytes(3).toString('hex')}-`);
const client = localClient(inject('dynamoEndpoint'));
const store = new DynamoStore(client, tables);
beforeAll(async () => {
  await ensureTables(client, tables);
});

async function callsOf(act: () => Promise<unknown>): Promise<string[]> {
  const calls: string[] = [];
  const stop = watchDynamoCalls((event) => calls.push(event));
  try {
    await act();
  } finally {
    stop();
  }
  return calls.sort();
}

describe.each([1, 4])('per-key totals of an account of %i slice(s)', (slices) => {
  it("cost the same DynamoDB calls for one key and for eight, and equal each key's keyUsage", async () => {
    const { accountId } = await accountWith(store, '100', `keyusage-${randomBytes(4).toString('hex')}`);
    if (slices > 1) expect(await store.splitAccount(accountId, slices)).toBe(slices);
    const keyIds: string[] = [];
    for (let i = 0; i < 8; i++) keyIds.push((await keyFor(store, accountId, `key ${i}`)).keyId);
    for (const [i, keyId] of keyIds.entries())
      await store.settleCharge(chargeEntry(accountId, keyId, BigInt(1_000 * (i + 1)), {}));
    const one = await callsOf(() => store.keysUsage(accountId, keyIds.slice(0, 1)));
    let usage = new Map<string, bigint>();
    const eight = await callsOf(async () => {
      usage = await store.keysUsage(accountId, keyIds);
    });
    expect(eight).toEqual(one);
    expect(eight.length).toBeLessThanOrEqual(2);
    for (const keyId of keyIds) expect(usage.get(keyId)).toBe(await store.keyUsage(accountId, keyId));
    expect([...usage.values()].reduce((a, b) => a + b, 0n)).toBe(36_000n);
  });
});
