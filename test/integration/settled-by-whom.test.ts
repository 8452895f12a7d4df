import { randomBytes } from 'node:crypto';
import { TransactWriteItemsCommand, type TransactWriteItemsCommandInput } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { usageRecordOf } from '../../functions/billing/usage-record.js';
import { newGenerationId } from '../../functions/core/ids.js';
import type { ChargeEntry, Hold, Store } from '../../functions/core/store.js';
import { billLoggedUsage, type LoggedUsageStore } from '../../functions/logged-usage/bill.js';
import { decodeLogsEvent } from '../../functions/logged-usage/subscription-event.js';
import { settlements } from '../../functions/shared/observability.js';
import { sweepExpiredHolds } from '../../functions/sweeper/sweep.js';
import { ensureTables, localClient } from '../../lib/local/dynamodb-local.js';
import { localTableNames } from '../../lib/local/stack.js';
import { accountWith, chargeEntry } from '../support/fixtures.js';
import { subscriptionEvent } from '../support/logs-subscription.js';
import { signedUsageLine, TEST_CHECKS } from '../support/usage-lines.js';

/**
 * A generation settled by two writers within the ten minutes DynamoDB answers a repeated
 * TransactWriteItems (same ClientRequestToken, same payload) as a success without applying it: it is
 * charged once, and counted billed once, by the writer whose own write made its ledger entry. On
 * DynamoDB Local, which answers a repeated token as DynamoDB does (the first case says so).
 */
const tables = localTableNames(`whom${randomBytes(3).toString('hex')}-`);
const client = localClient(inject('dynamoEndpoint'));
const store = new DynamoStore(client, tables);
beforeAll(async () => {
  await ensureTables(client, tables);
});

/** The generation's `generation usage` line, as CloudWatch Logs delivers it a minute after it was logged. */
const deliveryOf = (entry: ChargeEntry, hold: Hold | undefined) =>
  decodeLogsEvent(
    subscriptionEvent([
      {
        message: signedUsageLine(entry, hold),
        timestamp: Date.now() - 60_000,
      },
    ]),
  );

async function charged(accountId: string) {
  const ledger = await store.listLedger(accountId);
  const account = await store.getAccount(accountId);
  return {
    charges: ledger.filter((e) => e.type === 'charge').map((e) => e.entryId),
    balanceNano: account?.balanceNano,
    heldNano: account?.heldNano,
  };
}

describe('DynamoDB Local', () => {
  it('answers a TransactWriteItems repeated with its token as its commit, and the token with another payload as a mismatch', async () => {
    const { accountId } = await accountWith(store, '1');
    const input = (entryId: string): TransactWriteItemsCommandInput => ({
      ClientRequestToken: `probe-${accountId}`,
      TransactItems: [
        {
          Put: {
            TableName: tables.ledger,
            Item: { accountId: { S: accountId }, entryId: { S: entryId } },
            ConditionExpression: 'attribute_not_exists(entryId)',
          },
        },
      ],
    });
    await client.send(new TransactWriteItemsCommand(input('probe-1')));
    // Its condition (the entry must not exist) would fail were it applied again.
    await expect(client.send(new TransactWriteItemsCommand(input('probe-1')))).resolves.toBeDefined();
    await expect(client.send(new TransactWriteItemsCommand(input('probe-2')))).rejects.toMatchObject({
      name: 'IdempotentParameterMismatchException',
    });
  });
});

describe('a generation two writers settle', () => {
  it('two deliveries of its usage line, each read before either wrote: billed by one, already settled for the other', async () => {
    const { accountId, keyId } = await accountWith(store, '1');
    const entry = chargeEntry(accountId, keyId, 1_300n, { generationId: newGenerationId(Date.now(), 0) });
    const before = await charged(accountId);
    // Both invocations read that it has no ledger entry before either settles it.
    let reads = 0;
    let bothRead: () => void = () => {};
    const read = new Promise<void>((resolve) => {
      bothRead = resolve;
    });
    const port: LoggedUsageStore = {
      settleCharge: (e, options) => store.settleCharge(e, options),
      settledAmong: async (entries) => {
        const found = await store.settledAmong(entries);
        if (++reads === 2) bothRead();
        await read;
        return found;
      },
    };
    const batch = deliveryOf(entry, undefined);
    const [first, second] = await Promise.all([
      billLoggedUsage(port, batch, { checks: TEST_CHECKS }),
      billLoggedUsage(port, batch, { checks: TEST_CHECKS }),
    ]);
    expect([...(first?.billed ?? []), ...(second?.billed ?? [])]).toEqual([entry.generationId]);
    expect([...(first?.alreadySettled ?? []), ...(second?.alreadySettled ?? [])]).toEqual([
      entry.generationId,
    ]);
    const after = await charged(accountId);
    expect(after.charges).toEqual([entry.generationId]);
    expect((before.balanceNano ?? 0n) - (after.balanceNano ?? 0n)).toBe(1_300n);
  });

  it('the sweeper, which listed its hold before the logged-usage function billed it: counted by the logged-usage function only', async () => {
    const { accountId, keyId } = await accountWith(store, '1');
    const generationId = newGenerationId(Date.now(), 0);
    const createdAt = new Date().toISOString();
    const hold: Hold = {
      accountId,
      holdId: generationId,
      amountNano: 5_000n,
      expiresAt: Date.now() - 1,
      createdAt,
    };
    const entry = chargeEntry(accountId, keyId, 1_300n, { generationId, createdAt });
    const before = await charged(accountId);
    expect(await store.placeHold(hold)).toBe('held');
    // Its function wrote the usage record onto its hold, logged its line, and died before settling.
    expect(await store.recordUsageOnHold(hold, JSON.stringify(usageRecordOf(entry, hold)))).toBe(true);
    // The sweep lists the expired hold...
    const listed = await store.listHolds(accountId);
    expect(listed.map((h) => h.holdId)).toEqual([generationId]);
    // ...the logged-usage function bills the line, releasing the hold...
    const logged = await billLoggedUsage(store, deliveryOf(entry, hold), { checks: TEST_CHECKS });
    expect(logged.billed).toEqual([generationId]);
    // ...and the sweep settles what it listed: the same transaction, within the token's ten minutes.
    const sweeping = Object.assign(Object.create(store) as Store, { listHolds: async () => listed });
    const completedBefore = settlements.completedBySweeper;
    const swept = await sweepExpiredHolds(sweeping);
    expect(swept.completed).toBe(0);
    expect(settlements.completedBySweeper).toBe(completedBefore);
    const after = await charged(accountId);
    expect(after.charges).toEqual([generationId]);
    expect((before.balanceNano ?? 0n) - (after.balanceNano ?? 0n)).toBe(1_300n);
    expect(after.heldNano).toBe(before.heldNano);
    expect(await store.listHolds(accountId)).toEqual([]);
  });

  it('is still billed by a call whose commit it sent again (its answer lost), and by no later call', async () => {
    const { accountId, keyId } = await accountWith(store, '1');
    const entry = chargeEntry(accountId, keyId, 1_300n, { generationId: newGenerationId(Date.now(), 0) });
    // The first send commits and its answer is lost: the call sends the same transaction again.
    const lossy = new DynamoStore(client, tables);
    const send = lossy.wire.call.bind(lossy.wire);
    let sends = 0;
    lossy.wire.call = (async (...args: Parameters<typeof send>) => {
      const answer = await send(...args);
      if (args[0] === 'TransactWriteItems' && ++sends === 1)
        throw Object.assign(new Error('the answer was lost'), { name: 'TimeoutError' });
      return answer;
    }) as typeof send;
    expect(await lossy.settleCharge(entry)).toBe('settled');
    expect(sends).toBe(2);
    // Any later call, by this writer or another, finds it billed.
    expect(await lossy.settleCharge(entry)).toBe('already-settled');
    expect(await store.settleCharge(entry)).toBe('already-settled');
    expect((await charged(accountId)).charges).toEqual([entry.generationId]);
  });
});
