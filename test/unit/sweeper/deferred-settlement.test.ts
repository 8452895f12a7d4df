import { describe, expect, it, vi } from 'vitest';
import type { Bill } from '../../../functions/billing/bill.js';
import { settle } from '../../../functions/billing/settle.js';
import { Deadlines } from '../../../functions/completions/deadlines.js';
import type { ChargeEntry, Hold } from '../../../functions/core/store.js';
import { billingFailures, settlements } from '../../../functions/shared/observability.js';
import { sweepExpiredHolds } from '../../../functions/sweeper/sweep.js';
import { MemoryStore } from '../../support/memory-store.js';

/**
 * No settlement is left to a log line: one the function could not write goes to its hold item (or a
 * new one of amount 0), and the sweeper completes it, once, whatever else meets on the generation
 * (another sweep, the original write committing late, a function that died mid-settlement).
 */
const LIMITS = {
  settleReserveMs: 3_000,
  jsonReplyTimeoutMs: 10_000,
  upstreamBudgetMs: 10_000,
  holdExpiryMarginMs: 60_000,
};
const BILLED = 1_234_567n;

async function fixture(held: boolean) {
  const store = new MemoryStore();
  await store.createAccount('acct', 1_000_000_000n, new Date().toISOString());
  const deadlines = new Deadlines(Date.now(), 5_000, false, LIMITS);
  const id = `gen-${Math.floor(Date.now() / 1000)}-DEFERDEFERDEFER${held ? 'HELD0' : 'FAST0'}`;
  const entry: ChargeEntry = {
    accountId: 'acct',
    generationId: id,
    keyId: 'key',
    tier: 'svc-fast',
    upstreamModel: 'm',
    promptTokens: 3,
    completionTokens: 4,
    cachedTokens: 0,
    upstreamCostUsd: '0.001',
    billedNano: BILLED,
    estimated: false,
    createdAt: new Date(deadlines.startedAt).toISOString(),
  };
  let hold: Hold | undefined;
  if (held) {
    hold = {
      accountId: 'acct',
      holdId: id,
      amountNano: 50_000_000n,
      expiresAt: deadlines.holdExpiresAt,
      createdAt: entry.createdAt,
    };
    expect(await store.placeHold(hold)).toBe('held');
  }
  const bill: Bill = {
    entry,
    billedNano: BILLED,
    usage: { promptTokens: 3, completionTokens: 4, cachedTokens: 0 },
  };
  return { store, deadlines, entry, hold, bill };
}

const timeout = () => Object.assign(new Error('no answer in time'), { name: 'TimeoutError' });

async function expectBilledOnce(store: MemoryStore, entry: ChargeEntry) {
  const charges = (await store.listLedger('acct')).filter((e) => e.type === 'charge');
  expect(charges.map((c) => [c.entryId, c.deltaNano])).toEqual([[entry.generationId, -BILLED]]);
  const account = await store.getAccount('acct');
  expect(account).toMatchObject({ balanceNano: 1_000_000_000n - BILLED, heldNano: 0n });
  expect(store.holds.size).toBe(0);
}

describe('a settlement the function could not write', () => {
  it.each([false, true])('is deferred, then completed once by the sweeper (held %s)', async (held) => {
    const { store, deadlines, entry, hold, bill } = await fixture(held);
    // The write is never sent: every attempt times out, as a database that stopped answering.
    const unanswered = Object.assign(Object.create(store) as MemoryStore, {
      settleCharge: async () => Promise.reject(timeout()),
    });
    const failures = billingFailures.count;
    const deferred = settlements.deferred;
    expect(await settle(bill, { hold, deadlines }, unanswered)).toBe('deferred');
    expect(billingFailures.count).toBe(failures);
    expect(settlements.deferred).toBe(deferred + 1);
    const [item] = await store.listHolds('acct');
    expect(item).toMatchObject({
      holdId: entry.generationId,
      deferred: true,
      amountNano: hold?.amountNano ?? 0n,
    });
    expect(await store.listLedger('acct')).toHaveLength(1);

    // The next sweep (not waiting for any expiry) bills it, once.
    expect(await sweepExpiredHolds(store)).toEqual({ examined: 1, released: 0, completed: 1 });
    await expectBilledOnce(store, entry);
    expect(await sweepExpiredHolds(store)).toEqual({ examined: 0, released: 0, completed: 0 });
    // The original write, arriving after all: the generation is on the ledger already.
    expect(await store.settleCharge(entry, hold ? { hold } : {})).toBe('already-settled');
    await expectBilledOnce(store, entry);
  });

  it('is completed once when the function died after logging it: its hold carries the record', async () => {
    const { store, deadlines, entry, hold, bill } = await fixture(true);
    // The settlement's write never leaves: the function is frozen and killed mid-settlement.
    const dying = Object.assign(Object.create(store) as MemoryStore, {
      settleCharge: () => new Promise<never>(() => {}),
    });
    void settle(bill, { hold, deadlines }, dying);
    await vi.waitFor(() => expect(store.holds.get(entry.generationId)?.usageRecord).toBeDefined());
    // Before its expiry the function may still be settling it: the sweeper leaves it.
    expect(await sweepExpiredHolds(store)).toEqual({ examined: 1, released: 0, completed: 0 });
    const expiry = (hold?.expiresAt ?? 0) + 1;
    expect(await sweepExpiredHolds(store, expiry)).toEqual({ examined: 1, released: 0, completed: 1 });
    await expectBilledOnce(store, entry);
    expect(await sweepExpiredHolds(store, expiry)).toEqual({ examined: 0, released: 0, completed: 0 });
    await expectBilledOnce(store, entry);
  });

  it('is neither deferred nor a billing failure when it committed and only its answer was lost', async () => {
    const { store, deadlines, entry, bill } = await fixture(false);
    const lateCommit = Object.assign(Object.create(store) as MemoryStore, {
      settleCharge: async (...args: Parameters<MemoryStore['settleCharge']>) => {
        await store.settleCharge(...args);
        throw timeout();
      },
    });
    const failures = billingFailures.count;
    const deferred = settlements.deferred;
    expect(await settle(bill, { hold: undefined, deadlines }, lateCommit)).toBe('settled');
    expect(billingFailures.count).toBe(failures);
    expect(settlements.deferred).toBe(deferred);
    await expectBilledOnce(store, entry);
  });

  it('is a billing failure only when it can be neither written nor deferred', async () => {
    const { store, deadlines, bill } = await fixture(false);
    const down = Object.assign(Object.create(store) as MemoryStore, {
      settleCharge: async () => Promise.reject(timeout()),
      deferSettlement: async () => Promise.reject(timeout()),
    });
    const failures = billingFailures.count;
    expect(await settle(bill, { hold: undefined, deadlines }, down)).toBe('failed');
    expect(billingFailures.count).toBe(failures + 1);
  });
});
