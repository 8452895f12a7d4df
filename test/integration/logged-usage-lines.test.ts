import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { usageRecordOf } from '../../functions/billing/usage-record.js';
import { newGenerationId } from '../../functions/core/ids.js';
import { billLoggedUsage } from '../../functions/logged-usage/bill.js';
import { decodeLogsEvent } from '../../functions/logged-usage/subscription-event.js';
import { billLoggedGenerations } from '../../lib/admin/usage-records.js';
import { ensureTables, localClient } from '../../lib/local/dynamodb-local.js';
import { localTableNames } from '../../lib/local/stack.js';
import { accountWith, chargeEntry } from '../support/fixtures.js';
import { subscriptionEvent } from '../support/logs-subscription.js';
import { signedUsageLine, TEST_CHECKS, TEST_SIGNING_KEY, usageLineOf } from '../support/usage-lines.js';

/**
 * Usage lines that are not as the completions function wrote them, billed from the log by the
 * logged-usage function and `admin bill-logged` against DynamoDB Local: a line that names a slice
 * other than its generation id's, or none, bills nothing again; an unsigned or wrongly signed one (a
 * billed generation re-addressed to another account, a new id billing $1,000,000) charges no one.
 */
const tables = localTableNames(`lines${randomBytes(3).toString('hex')}-`);
const client = localClient(inject('dynamoEndpoint'));
const store = new DynamoStore(client, tables);
beforeAll(async () => {
  await ensureTables(client, tables);
});

const OPERATOR = { env: { USAGE_SIGNING_KEY: TEST_SIGNING_KEY } as NodeJS.ProcessEnv };
/** Lines as CloudWatch Logs delivers them, a minute after they were logged (past any settlement window). */
const delivered = (...messages: string[]) =>
  decodeLogsEvent(
    subscriptionEvent(messages.map((message) => ({ message, timestamp: Date.now() - 60_000 }))),
  );

async function charged(accountId: string) {
  const ledger = await store.listLedger(accountId);
  return {
    charges: ledger.filter((e) => e.type === 'charge').map((e) => e.entryId),
    balanceNano: (await store.getAccount(accountId))?.balanceNano,
  };
}

describe('a generation settled on slice 7', () => {
  it('is billed nothing again from a line that omits its slice or names another', async () => {
    const { accountId, keyId } = await accountWith(store, '8');
    await store.splitAccount(accountId, 8);
    const generationId = newGenerationId(Date.now(), 7);
    const entry = chargeEntry(accountId, keyId, 1_300n, { generationId, slice: 7 });
    expect(await store.settleCharge(entry)).toBe('settled');
    const before = await charged(accountId);
    expect(before.charges).toEqual([generationId]);

    const { slice: _slice, ...record } = usageRecordOf(entry, undefined);
    // Signed as its function signs: the slice is read from the id, not from the line.
    const omitted = usageLineOf(record);
    const another = usageLineOf({ ...record, slice: 3 });
    const logged = await billLoggedUsage(store, delivered(omitted, another), { checks: TEST_CHECKS });
    expect(logged).toMatchObject({ billed: [], alreadySettled: [generationId], unreadable: 1 });
    const operator = await billLoggedGenerations(store, [omitted, another].join('\n'), OPERATOR);
    expect(operator).toMatchObject({ settled: [], alreadySettled: [generationId], invalid: 1 });
    expect(await charged(accountId)).toEqual(before);
  });
});

describe('a line someone else wrote into the log', () => {
  it('charges no one: a billed generation re-addressed to another account, a new id billing $1,000,000', async () => {
    const payer = await accountWith(store, '1');
    const victim = await accountWith(store, '1');
    const entry = chargeEntry(payer.accountId, payer.keyId, 1_300n, {
      generationId: newGenerationId(Date.now(), 0),
    });
    expect(await store.settleCharge(entry)).toBe('settled');
    const readdressed = { ...entry, accountId: victim.accountId };
    const huge = chargeEntry(victim.accountId, victim.keyId, 10n ** 15n, {
      generationId: newGenerationId(Date.now(), 0),
    });
    const lines = [
      signedUsageLine(readdressed, undefined, null),
      signedUsageLine(huge, undefined, null),
      signedUsageLine(huge, undefined, 'a key that is not the stack'),
    ];
    const before = { payer: await charged(payer.accountId), victim: await charged(victim.accountId) };

    const logged = await billLoggedUsage(store, delivered(...lines), { checks: TEST_CHECKS });
    expect(logged).toMatchObject({ billed: [], refused: 2 });
    const operator = await billLoggedGenerations(store, lines.join('\n'), OPERATOR);
    expect(operator).toMatchObject({ settled: [], invalid: 2 });
    // Signed, a bill beyond what its tokens could cost is refused too.
    const signedHuge = await billLoggedGenerations(store, signedUsageLine(huge), OPERATOR);
    expect(signedHuge.refused).toEqual([
      expect.objectContaining({
        generationId: huge.generationId,
        reason: expect.stringMatching(/^out of bounds/),
      }),
    ]);

    expect(await charged(payer.accountId)).toEqual(before.payer);
    expect(await charged(victim.accountId)).toEqual(before.victim);
    expect(before.victim.balanceNano).toBe(1_000_000_000n);
  });
});
