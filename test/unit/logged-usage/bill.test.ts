import { describe, expect, it } from 'vitest';
import { usageRecordOf } from '../../../functions/billing/usage-record.js';
import type { ChargeEntry, Hold } from '../../../functions/core/store.js';
import { billLoggedUsage, type LoggedUsageStore } from '../../../functions/logged-usage/bill.js';
import { decodeLogsEvent } from '../../../functions/logged-usage/subscription-event.js';
import { chargeEntry } from '../../support/fixtures.js';
import { type LoggedLine, subscriptionEvent } from '../../support/logs-subscription.js';
import { MemoryStore } from '../../support/memory-store.js';

/**
 * The logged-usage function's core: a batch of usage lines, delivered by CloudWatch Logs, bills each
 * generation that has no ledger entry once (its hold released), reads only for those that have one,
 * does not race a function that may still be settling, and fails the batch on a database failure only.
 */
const NOW = 1_750_000_000_000;
let counter = 0;

async function fixture() {
  const store = new MemoryStore();
  await store.createAccount('acct', 1_000_000_000n, new Date(NOW).toISOString());
  const reads: string[][] = [];
  const port: LoggedUsageStore = {
    settleCharge: (entry, options) => store.settleCharge(entry, options),
    settledAmong: async (entries) => {
      reads.push(entries.map((e) => e.generationId));
      const found = new Set<string>();
      for (const e of entries)
        if (await store.getLedgerEntry(e.accountId, e.generationId)) found.add(e.generationId);
      return found;
    },
  };
  return { store, port, reads };
}

function generation(held: boolean, accountId = 'acct'): { entry: ChargeEntry; hold: Hold | undefined } {
  counter += 1;
  const generationId = `gen-${NOW / 1000}-LOGGED${String(counter).padStart(4, '0')}`;
  const entry = chargeEntry(accountId, 'key', 1_300_000n, {
    generationId,
    createdAt: new Date(NOW).toISOString(),
  });
  const hold = held
    ? {
        accountId,
        holdId: generationId,
        amountNano: 50_000_000n,
        expiresAt: NOW + 360_000,
        createdAt: entry.createdAt,
      }
    : undefined;
  return { entry, hold };
}

const line = (g: { entry: ChargeEntry; hold: Hold | undefined }, timestamp = NOW - 60_000): LoggedLine => ({
  message: JSON.stringify({
    level: 'INFO',
    message: 'generation usage',
    record: usageRecordOf(g.entry, g.hold),
  }),
  timestamp,
});
const batchOf = (lines: LoggedLine[]) => decodeLogsEvent(subscriptionEvent(lines));
const options = { now: () => NOW, sleep: async () => {} };

describe('billLoggedUsage', () => {
  it('bills a generation with no ledger entry once, releasing its hold; the same batch again bills nothing', async () => {
    const { store, port } = await fixture();
    const killed = generation(true);
    expect(await store.placeHold(killed.hold as Hold)).toBe('held');
    const batch = batchOf([line(killed)]);

    const first = await billLoggedUsage(port, batch, options);
    expect(first).toEqual({
      billed: [killed.entry.generationId],
      alreadySettled: [],
      unreadable: 0,
      unbillable: [],
    });
    const account = await store.getAccount('acct');
    expect(account?.balanceNano).toBe(1_000_000_000n - 1_300_000n);
    expect(account?.heldNano).toBe(0n);
    expect(store.holds.size).toBe(0);

    // Lambda's retry of the same event.
    const again = await billLoggedUsage(port, batch, options);
    expect(again).toEqual({
      billed: [],
      alreadySettled: [killed.entry.generationId],
      unreadable: 0,
      unbillable: [],
    });
    expect((await store.getAccount('acct'))?.balanceNano).toBe(account?.balanceNano);
  });

  it('reads, and writes nothing, for generations their functions settled', async () => {
    const { store, port, reads } = await fixture();
    const settled = [generation(false), generation(false)];
    for (const g of settled) await store.settleCharge(g.entry);
    store.calls.length = 0;
    const result = await billLoggedUsage(port, batchOf(settled.map((g) => line(g))), options);
    expect(result.billed).toEqual([]);
    expect(result.alreadySettled.sort()).toEqual(settled.map((g) => g.entry.generationId).sort());
    expect(reads).toHaveLength(1);
    expect(store.calls).not.toContain('settleCharge');
  });

  it('waits out the settlement window of a young line, and leaves it to its function if it settled meanwhile', async () => {
    const { store, port, reads } = await fixture();
    const slow = generation(false);
    const waits: number[] = [];
    const result = await billLoggedUsage(port, batchOf([line(slow, NOW - 3_000)]), {
      now: () => NOW,
      settlementWindowMs: 10_000,
      sleep: async (ms) => {
        waits.push(ms);
        // The function's settlement commits while the consumer waits.
        await store.settleCharge(slow.entry);
      },
    });
    expect(waits).toEqual([7_000]);
    expect(reads).toHaveLength(2);
    expect(result).toMatchObject({ billed: [], alreadySettled: [slow.entry.generationId] });
    expect((await store.getAccount('acct'))?.balanceNano).toBe(1_000_000_000n - 1_300_000n);
  });

  it('counts an unreadable record and bills the rest of the batch; an unknown account is left and logged', async () => {
    const { store, port } = await fixture();
    const good = generation(false);
    const orphan = generation(false, 'no-such-account');
    const garbled = {
      message: JSON.stringify({ message: 'generation usage', record: { accountId: 'acct' } }),
    };
    const result = await billLoggedUsage(
      port,
      batchOf([garbled, line(orphan), { message: 'END RequestId: 1' }, line(good)]),
      options,
    );
    expect(result).toEqual({
      billed: [good.entry.generationId],
      alreadySettled: [],
      unreadable: 1,
      unbillable: [orphan.entry.generationId],
    });
    expect((await store.getAccount('acct'))?.balanceNano).toBe(1_000_000_000n - 1_300_000n);
  });

  it('throws on a database failure, so that Lambda retries the batch', async () => {
    const { port } = await fixture();
    const failing: LoggedUsageStore = {
      ...port,
      settleCharge: async () => {
        throw Object.assign(new Error('timed out'), { name: 'TimeoutError' });
      },
    };
    await expect(billLoggedUsage(failing, batchOf([line(generation(false))]), options)).rejects.toThrow(
      'timed out',
    );
    const unreadable: LoggedUsageStore = {
      ...port,
      settledAmong: async () => {
        throw new Error('ProvisionedThroughputExceededException');
      },
    };
    await expect(billLoggedUsage(unreadable, batchOf([line(generation(false))]), options)).rejects.toThrow();
  });

  it('does nothing for a batch with no usage line', async () => {
    const { port, reads } = await fixture();
    const result = await billLoggedUsage(port, batchOf([{ message: 'START RequestId: 1' }]), options);
    expect(result).toEqual({ billed: [], alreadySettled: [], unreadable: 0, unbillable: [] });
    expect(reads).toEqual([]);
  });
});
