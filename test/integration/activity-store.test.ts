import { randomBytes } from 'node:crypto';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { dynamoTimeouts } from '../../functions/adapters/dynamodb/timeouts.js';
import { newGenerationId } from '../../functions/core/ids.js';
import { type LedgerEntry, type Store, utcDay } from '../../functions/core/store.js';
import { ensureTables, localClient } from '../../lib/local/dynamodb-local.js';
import { itemSize, writeUnits } from '../../lib/local/dynamodb-units.js';
import { localTableNames } from '../../lib/local/stack.js';
import { accountWith, chargeEntry } from '../support/fixtures.js';
import { MemoryStore } from '../support/memory-store.js';

/**
 * Activity's daily totals (adapters/dynamodb/activity.ts): kept by the settlement's own update and
 * rolled into day items by the sweeper, they must equal the ledger to the nano-dollar, whatever
 * retries, replays and roll-ups meet, on both implementations of the port.
 */
const tables = localTableNames(`activity${randomBytes(3).toString('hex')}-`);
const client = localClient(inject('dynamoEndpoint'));
beforeAll(async () => {
  await ensureTables(client, tables);
});

const stores: [string, () => Store & { rollUpActivity?: (today: string) => Promise<number> }][] = [
  ['in memory', () => new MemoryStore()],
  // DynamoDB Local's bounds (5 s an attempt), not a deployed function's (1 s): on a busy machine the
  // concurrent settlements below can keep DynamoDB Local past a second.
  [
    'DynamoDB',
    () => new DynamoStore(client, tables, dynamoTimeouts({ DYNAMODB_ENDPOINT: inject('dynamoEndpoint') })),
  ],
];

/** The ledger's own sums by UTC day and tier: what every total must equal. */
function ledgerSums(entries: LedgerEntry[]): Map<string, bigint> {
  const sums = new Map<string, bigint>();
  for (const entry of entries) {
    if (entry.type !== 'charge') continue;
    const key = `${utcDay(entry.createdAt)} ${entry.tier}`;
    sums.set(key, (sums.get(key) ?? 0n) - entry.deltaNano);
  }
  return sums;
}

function spendSums(days: { day: string; byTier: Record<string, bigint> }[]): Map<string, bigint> {
  const sums = new Map<string, bigint>();
  for (const { day, byTier } of days)
    for (const [tier, nano] of Object.entries(byTier)) if (nano !== 0n) sums.set(`${day} ${tier}`, nano);
  return sums;
}

describe.each(stores)('activity on the store %s', (_name, make) => {
  const store = make();
  const newAccount = async () => accountWith(store, '100', `activity-${randomBytes(4).toString('hex')}`);

  it('keeps daily totals equal to the ledger after concurrent settlements, replays and roll-ups', async () => {
    const { accountId, keyId } = await newAccount();
    if (store instanceof DynamoStore) await store.splitAccount(accountId, 3);
    const slices = store instanceof DynamoStore ? 3 : 1;
    // Around one UTC midnight: the last millisecond of a day and the first of the next.
    const times = ['2026-03-01T23:59:59.999Z', '2026-03-02T00:00:00.000Z', '2026-03-02T12:00:00.000Z'];
    const tiers = ['svc-fast', 'svc-pro', 'svc-heavy'];
    const entries = Array.from({ length: 45 }, (_, i) => {
      const slice = i % slices;
      const createdAt = times[i % 3] as string;
      return chargeEntry(accountId, keyId, BigInt(1_000_003 + i * 7919), {
        generationId: newGenerationId(Date.parse(createdAt), slice),
        tier: tiers[Math.floor(i / 3) % 3] as string,
        createdAt,
        ...(slice ? { slice } : {}),
      });
    });
    // Each settled three times at once (a retry, the sweeper, bill-logged): charged once each.
    const outcomes = await Promise.all(entries.flatMap((e) => [e, e, e].map((x) => store.settleCharge(x))));
    expect(outcomes.filter((o) => o === 'settled')).toHaveLength(entries.length);

    if (store instanceof DynamoStore) {
      // What the counters cost the settlement: the slice item's bytes (a transaction: 2 units a KB).
      const out = await client.send(
        new GetItemCommand({ TableName: tables.accounts, Key: { accountId: { S: accountId } } }),
      );
      const item = out.Item ?? {};
      const without = Object.fromEntries(Object.entries(item).filter(([name]) => !name.startsWith('d_')));
      const size = (i: object) => itemSize(i as Parameters<typeof itemSize>[0]);
      const [before, after] = [size(without), size(item)];
      console.info(
        `slice item: ${before} bytes without the day counters, ${after} with ${Object.keys(item).length - Object.keys(without).length} day counters`,
      );
      expect(writeUnits(after, true)).toBe(writeUnits(before, true));
    }
    const read = () => store.dailySpend(accountId, { today: '2026-03-02', days: 30 });
    const expected = ledgerSums(await store.listLedger(accountId));
    expect(expected.size).toBe(6);
    expect(spendSums(await read())).toEqual(expected);
    const days = await read();
    expect(days).toHaveLength(30);
    expect(days[29]?.day).toBe('2026-03-02');
    expect(days[28]?.day).toBe('2026-03-01');

    // Rolled up (twice at once: each counter moves once), then a late settlement of a rolled day.
    await Promise.all([store.rollUpActivity?.('2026-03-03'), store.rollUpActivity?.('2026-03-03')]);
    expect(spendSums(await read())).toEqual(expected);
    if (store instanceof DynamoStore) {
      // The slice items keep no past day's counter: what they carry stays bounded.
      const out = await client.send(
        new GetItemCommand({ TableName: tables.accounts, Key: { accountId: { S: accountId } } }),
      );
      expect(Object.keys(out.Item ?? {}).filter((name) => name.startsWith('d_'))).toEqual([]);
      expect(out.Item?.rolls?.N).toBe('1');
    }
    const late = chargeEntry(accountId, keyId, 5n, {
      generationId: newGenerationId(Date.parse(times[0] as string), 0),
      createdAt: times[0] as string,
    });
    await Promise.all([store.settleCharge(late), store.settleCharge(late)]);
    const [during] = await Promise.all([read(), store.rollUpActivity?.('2026-03-03')]);
    const after = ledgerSums(await store.listLedger(accountId));
    expect(spendSums(during ?? [])).toEqual(after);
    expect(spendSums(await read())).toEqual(after);
    await store.rollUpActivity?.('2026-03-03');
    expect(spendSums(await read())).toEqual(after);
  });

  it("never shows another account's spend or charges", async () => {
    const a = await newAccount();
    const b = await newAccount();
    await store.settleCharge(chargeEntry(a.accountId, a.keyId, 77n, { createdAt: '2026-03-02T01:00:00Z' }));
    const spend = await store.dailySpend(b.accountId, { today: '2026-03-02', days: 30 });
    expect(spend.every((day) => Object.keys(day.byTier).length === 0)).toBe(true);
    expect((await store.listCharges(b.accountId, { limit: 50 })).charges).toEqual([]);
  });

  it('lists every charge once, newest first, a page at a time, over the slices', async () => {
    const { accountId, keyId } = await newAccount();
    if (store instanceof DynamoStore) await store.splitAccount(accountId, 2);
    await store.topUp(accountId, 'extra', 1n, new Date().toISOString());
    const base = Date.parse('2026-03-02T00:00:00Z');
    const ids: string[] = [];
    for (let i = 0; i < 23; i++) {
      const slice = store instanceof DynamoStore ? i % 2 : 0;
      const entry = chargeEntry(accountId, keyId, 10n, {
        generationId: newGenerationId(base + i * 1000, slice),
        createdAt: new Date(base + i * 1000).toISOString(),
        ...(slice ? { slice } : {}),
      });
      ids.push(entry.generationId);
      await store.settleCharge(entry);
    }
    const seen: string[] = [];
    let after: string | undefined;
    do {
      const page = await store.listCharges(accountId, { limit: 10, ...(after ? { after } : {}) });
      expect(page.charges.length).toBeLessThanOrEqual(10);
      seen.push(...page.charges.map((c) => c.entryId));
      after = page.next;
    } while (after);
    expect(seen).toEqual([...ids].sort().reverse());
  });

  it('orders charges of one second by their time to the ms, not by id, every one once over the pages and slices', async () => {
    const { accountId, keyId } = await newAccount();
    if (store instanceof DynamoStore) await store.splitAccount(accountId, 3);
    const base = Date.parse('2026-03-04T00:00:19Z');
    // Seconds 18, 19 and 20, each with 9 charges whose ids are in no relation to their milliseconds.
    const made: { id: string; at: number }[] = [];
    for (let i = 0; i < 27; i++) {
      const second = base + (Math.floor(i / 9) - 1) * 1000;
      const at = second + ((i * 337) % 1000);
      const slice = store instanceof DynamoStore ? i % 3 : 0;
      const entry = chargeEntry(accountId, keyId, 10n, {
        generationId: newGenerationId(second, slice),
        createdAt: new Date(at).toISOString(),
        ...(slice ? { slice } : {}),
      });
      made.push({ id: entry.generationId, at });
      await store.settleCharge(entry);
    }
    const expected = made.sort((a, b) => b.at - a.at).map((m) => m.id);
    for (const limit of [4, 9, 50]) {
      const seen: string[] = [];
      let after: string | undefined;
      do {
        const page = await store.listCharges(accountId, { limit, ...(after ? { after } : {}) });
        expect(page.charges.length).toBeLessThanOrEqual(limit);
        seen.push(...page.charges.map((c) => c.entryId));
        after = page.next;
      } while (after);
      expect(seen).toEqual(expected);
    }
  });

  it('orders charges of the same ms as DynamoDB does (by bytes: "0V..." before "0b..."), every one once over the pages', async () => {
    const { accountId, keyId } = await newAccount();
    if (store instanceof DynamoStore) await store.splitAccount(accountId, 2);
    const at = Date.parse('2026-03-03T00:00:00Z');
    const ids: string[] = [];
    for (let i = 0; i < 24; i++) {
      const slice = store instanceof DynamoStore ? i % 2 : 0;
      // Upper and lower case after the slice's character: a locale-aware order would interleave them.
      const id = `gen-${at / 1000}-${slice}${i % 3 === 0 ? 'V' : i % 3 === 1 ? 'b' : 'a'}${String(i).padStart(18, 'x')}`;
      ids.push(id);
      await store.settleCharge(
        chargeEntry(accountId, keyId, 10n, {
          generationId: id,
          createdAt: new Date(at).toISOString(),
          ...(slice ? { slice } : {}),
        }),
      );
    }
    const seen: string[] = [];
    let after: string | undefined;
    do {
      const page = await store.listCharges(accountId, { limit: 5, ...(after ? { after } : {}) });
      seen.push(...page.charges.map((c) => c.entryId));
      after = page.next;
    } while (after);
    expect(seen).toEqual([...ids].sort().reverse());
  });
});
