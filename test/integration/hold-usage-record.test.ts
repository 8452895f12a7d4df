import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import type { Hold } from '../../functions/core/store.js';
import { sweepExpiredHolds } from '../../functions/sweeper/sweep.js';
import { ensureTables, localClient } from '../../lib/local/dynamodb-local.js';
import { localTableNames } from '../../lib/local/stack.js';

/**
 * A failed settlement's usage record kept on its hold, in DynamoDB Local: written only while the hold
 * exists (never recreating a released one), read back by the sweeper's listing.
 */
const tables = localTableNames(`hur${randomBytes(3).toString('hex')}-`);
const client = localClient(inject('dynamoEndpoint'));
const store = new DynamoStore(client, tables);

beforeAll(async () => {
  await ensureTables(client, tables);
  await store.createAccount('acct-hur', 1_000_000_000n, new Date().toISOString());
});

const hold = (holdId: string): Hold => ({
  accountId: 'acct-hur',
  holdId,
  amountNano: 5_000_000n,
  expiresAt: Date.now() - 1,
  createdAt: new Date().toISOString(),
});

describe('recordUsageOnHold', () => {
  it('keeps the record on a live hold, where the sweeper finds it', async () => {
    const live = hold('gen-1767225600-HURLIVE');
    expect(await store.placeHold(live)).toBe('held');
    const record = JSON.stringify({ generationId: live.holdId, billedNano: '123' });
    expect(await store.recordUsageOnHold(live, record)).toBe(true);
    const [listed] = await store.listHolds('acct-hur');
    expect(listed).toMatchObject({ holdId: live.holdId, amountNano: 5_000_000n, usageRecord: record });
    expect(await sweepExpiredHolds(store)).toMatchObject({ released: 1 });
    expect((await store.getAccount('acct-hur'))?.heldNano).toBe(0n);
  });

  it('writes nothing for a hold that is gone (released or settled meanwhile)', async () => {
    const gone = hold('gen-1767225600-HURGONE');
    expect(await store.recordUsageOnHold(gone, '{}')).toBe(false);
    expect(await store.listHolds('acct-hur')).toEqual([]);
  });
});
