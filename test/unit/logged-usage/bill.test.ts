import { describe, expect, it } from 'vitest';
import { usageRecordOf } from '../../../functions/billing/usage-record.js';
import type { ChargeEntry, Hold } from '../../../functions/core/store.js';
import { billLoggedUsage, type LoggedUsageStore } from '../../../functions/logged-usage/bill.js';
import { decodeLogsEvent } from '../../../functions/logged-usage/subscription-event.js';
import { chargeEntry } from '../../support/fixtures.js';
import { type LoggedLine, subscriptionEvent } from '../../support/logs-subscription.js';
import { MemoryStore } from '../../support/memory-store.js';
import { signedUsageLine, TEST_CHECKS, usageLineOf } from '../../support/usage-lines.js';

/**
 * The logged-usage function's core: a batch of usage lines, delivered by CloudWatch Logs, bills each
 * generation that has no ledger entry once (its hold released), reads only for those that have one,
 * does not race a function that may still be settling, and fails the batch on a database failure only.
 * Only a line signed with the usage-signing key is billed, and only up to what its generation could
 * have cost: anyone who can write to the log group can write a line.
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
  // $0.001 upstream, within what 100 + 1,000 tokens cost at svc-fast's simulator prices.
  const entry = chargeEntry(accountId, 'key', 1_300_000n, {
    generationId,
    promptTokens: 100,
    completionTokens: 1_000,
    upstreamCostUsd: '0.001',
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
  message: signedUsageLine(g.entry, g.hold),
  timestamp,
});
const batchOf = (lines: LoggedLine[]) => decodeLogsEvent(subscriptionEvent(lines));
const options = { now: () => NOW, sleep: async () => {} };
const NOTHING = { billed: [], alreadySettled: [], unreadable: 0, refused: 0, unbillable: [] };

describe('billLoggedUsage', () => {
  it('bills a generation with no ledger entry once, releasing its hold; the same batch again bills nothing', async () => {
    const { store, port } = await fixture();
    const killed = generation(true);
    expect(await store.placeHold(killed.hold as Hold)).toBe('held');
    const batch = batchOf([line(killed)]);

    const first = await billLoggedUsage(port, batch, { ...options, checks: TEST_CHECKS });
    expect(first).toEqual({ ...NOTHING, billed: [killed.entry.generationId] });
    const account = await store.getAccount('acct');
    expect(account?.balanceNano).toBe(1_000_000_000n - 1_300_000n);
    expect(account?.heldNano).toBe(0n);
    expect(store.holds.size).toBe(0);

    // Lambda's retry of the same event.
    const again = await billLoggedUsage(port, batch, { ...options, checks: TEST_CHECKS });
    expect(again).toEqual({ ...NOTHING, alreadySettled: [killed.entry.generationId] });
    expect((await store.getAccount('acct'))?.balanceNano).toBe(account?.balanceNano);
  });

  it('reads, and writes nothing, for generations their functions settled', async () => {
    const { store, port, reads } = await fixture();
    const settled = [generation(false), generation(false)];
    for (const g of settled) await store.settleCharge(g.entry);
    store.calls.length = 0;
    const result = await billLoggedUsage(port, batchOf(settled.map((g) => line(g))), {
      ...options,
      checks: TEST_CHECKS,
    });
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
      checks: TEST_CHECKS,
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
      { ...options, checks: TEST_CHECKS },
    );
    expect(result).toEqual({
      ...NOTHING,
      billed: [good.entry.generationId],
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
    await expect(
      billLoggedUsage(failing, batchOf([line(generation(false))]), { ...options, checks: TEST_CHECKS }),
    ).rejects.toThrow('timed out');
    const unreadable: LoggedUsageStore = {
      ...port,
      settledAmong: async () => {
        throw new Error('ProvisionedThroughputExceededException');
      },
    };
    await expect(
      billLoggedUsage(unreadable, batchOf([line(generation(false))]), { ...options, checks: TEST_CHECKS }),
    ).rejects.toThrow();
  });

  it('does nothing for a batch with no usage line', async () => {
    const { port, reads } = await fixture();
    const result = await billLoggedUsage(port, batchOf([{ message: 'START RequestId: 1' }]), {
      ...options,
      checks: TEST_CHECKS,
    });
    expect(result).toEqual(NOTHING);
    expect(reads).toEqual([]);
  });
});

describe('a usage line not written by the completions function', () => {
  it('is refused unsigned or wrongly signed: a billed generation re-addressed to another account, and a new id billing $1,000,000', async () => {
    const { store, port } = await fixture();
    await store.createAccount('victim', 1_000_000_000n, new Date(NOW).toISOString());
    const billed = generation(false);
    await store.settleCharge(billed.entry);
    const readdressed = { ...billed.entry, accountId: 'victim' };
    const huge = generation(false, 'victim');
    huge.entry.billedNano = 10n ** 15n;
    const copied = generation(false, 'victim');
    const result = await billLoggedUsage(
      port,
      batchOf([
        { message: usageLineOf(usageRecordOf(readdressed, undefined), null), timestamp: NOW - 60_000 },
        { message: signedUsageLine(huge.entry, undefined, 'not-the-key'), timestamp: NOW - 60_000 },
        // A genuine line's signature on another record.
        {
          message: JSON.stringify({
            ...JSON.parse(signedUsageLine(billed.entry)),
            record: usageRecordOf(copied.entry, undefined),
          }),
          timestamp: NOW - 60_000,
        },
      ]),
      { ...options, checks: TEST_CHECKS },
    );
    expect(result).toEqual({ ...NOTHING, refused: 3 });
    expect((await store.getAccount('victim'))?.balanceNano).toBe(1_000_000_000n);
    expect(await store.getLedgerEntry('victim', billed.entry.generationId)).toBeUndefined();
  });

  it('is refused, signed, when it bills more than its generation could have cost', async () => {
    const { store, port } = await fixture();
    const gone = (change: (g: ReturnType<typeof generation>) => void, held = false) => {
      const g = generation(held);
      change(g);
      return line(g);
    };
    const result = await billLoggedUsage(
      port,
      batchOf([
        // A bill that is not its upstream cost x 1.3.
        gone((g) => {
          g.entry.billedNano = 10n ** 15n;
        }),
        // A cost of $1,000,000 (billed x 1.3) for 1,100 tokens.
        gone((g) => {
          g.entry.upstreamCostUsd = '1000000';
          g.entry.billedNano = 1_300_000_000_000_000n;
        }),
        // More completion tokens than any svc-fast request may ask for.
        gone((g) => {
          g.entry.completionTokens = 200_000;
        }),
        // More than its hold, its own request's worst case.
        gone((g) => {
          if (g.hold) g.hold.amountNano = 1_000_000n;
        }, true),
        // A tier that does not exist.
        gone((g) => {
          g.entry.tier = 'svc-gold';
        }),
      ]),
      { ...options, checks: TEST_CHECKS },
    );
    expect(result).toEqual({ ...NOTHING, refused: 5 });
    expect((await store.getAccount('acct'))?.balanceNano).toBe(1_000_000_000n);
  });

  it('never stands in for its genuine line in the same batch', async () => {
    const { store, port } = await fixture();
    const killed = generation(false);
    const forged = { ...killed.entry, billedNano: 10n ** 15n };
    const result = await billLoggedUsage(
      port,
      batchOf([
        { message: usageLineOf(usageRecordOf(forged, undefined), null), timestamp: NOW - 60_000 },
        line(killed),
        { message: usageLineOf(usageRecordOf(forged, undefined), 'not-the-key'), timestamp: NOW - 60_000 },
      ]),
      { ...options, checks: TEST_CHECKS },
    );
    expect(result).toEqual({ ...NOTHING, billed: [killed.entry.generationId] });
    expect((await store.getAccount('acct'))?.balanceNano).toBe(1_000_000_000n - 1_300_000n);
  });

  it('bills nothing and counts nothing when its generation is on the ledger (a line logged unsigned before lines were signed)', async () => {
    const { store, port } = await fixture();
    const settled = generation(false);
    await store.settleCharge(settled.entry);
    const result = await billLoggedUsage(
      port,
      batchOf([{ message: usageLineOf(usageRecordOf(settled.entry, undefined), null) }]),
      { ...options, checks: TEST_CHECKS },
    );
    expect(result).toEqual({ ...NOTHING, alreadySettled: [settled.entry.generationId] });
  });

  it('is billed once signed with the previous key during a rotation', async () => {
    const { port } = await fixture();
    const g = generation(false);
    const result = await billLoggedUsage(
      port,
      batchOf([{ message: signedUsageLine(g.entry, undefined, 'previous-key'), timestamp: NOW - 60_000 }]),
      { ...options, checks: { ...TEST_CHECKS, keys: ['current-key', 'previous-key'] } },
    );
    expect(result).toEqual({ ...NOTHING, billed: [g.entry.generationId] });
  });
});
