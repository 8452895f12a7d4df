import { describe, expect, it } from 'vitest';
import type { Billable, Delivered } from '../../../functions/billing/bill.js';
import { billOnce } from '../../../functions/billing/bill-once.js';
import { settle } from '../../../functions/billing/settle.js';
import type { Hold } from '../../../functions/core/store.js';
import { usageRecordFailures } from '../../../functions/shared/observability.js';
import { PRICED_TARGET } from '../../support/fixtures.js';
import { MemoryStore } from '../../support/memory-store.js';

/**
 * A generation's one bill (bill-once.ts) and its settlement (settle.ts), against the in-memory store:
 * priced once, written once, after the reply on the fast path and before it on the held path.
 */
const GENERATION = 'gen-1767225600-ONCEONCEONCEONCEONCE';
const BALANCE = 1_000_000_000n;

const target = PRICED_TARGET;

const delivered: Delivered = {
  report: { usage: { promptTokens: 1_000, completionTokens: 500, cachedTokens: 0 }, raw: {}, notes: [] },
  text: 'x'.repeat(600),
  notes: [],
  finishReason: 'stop',
  cut: false,
};

async function fixture(held: boolean) {
  const store = new MemoryStore();
  await store.createAccount('acct-1', BALANCE, new Date().toISOString());
  let hold: Hold | undefined;
  if (held) {
    hold = {
      accountId: 'acct-1',
      holdId: GENERATION,
      amountNano: 50_000_000n,
      expiresAt: Date.now() + 60_000,
      createdAt: new Date().toISOString(),
    };
    expect(await store.placeHold(hold)).toBe('held');
  }
  const billable: Billable = {
    id: GENERATION,
    caller: {
      keyId: 'key-1',
      accountId: 'acct-1',
      keyStatus: 'active',
      accountStatus: 'active',
      balanceNano: BALANCE,
      heldNano: hold?.amountNano ?? 0n,
    },
    request: { model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }] } as Billable['request'],
    target,
    deadlines: {
      startedAt: Date.now(),
      estimate: Date.now() + 60_000,
      settleCallBy: () => Date.now() + 5_000,
    },
    outputCap: 1_000,
    promptBound: 10_000,
    bodyBytes: 100,
    hold,
  };
  const afterReply: Promise<void>[] = [];
  const bill = billOnce(billable, { store, afterReply: (work) => afterReply.push(work) });
  return { store, bill, afterReply, billable };
}

async function charges(store: MemoryStore) {
  return (await store.listLedger('acct-1'))
    .filter((entry) => entry.type === 'charge')
    .map((entry) => [entry.entryId, entry.deltaNano]);
}

describe('billOnce', () => {
  it('prices, then leaves the settlement to run after the reply on the fast path', async () => {
    const { store, bill, afterReply } = await fixture(false);
    const priced = await bill(delivered);
    expect(priced.billedNano).toBe(2_600_000n);
    expect(afterReply).toHaveLength(1);
    await Promise.all(afterReply);
    expect(await charges(store)).toEqual([[GENERATION, -2_600_000n]]);
    expect((await store.getAccount('acct-1'))?.balanceNano).toBe(BALANCE - 2_600_000n);
  });

  it('settles a held request before it answers, releasing its hold', async () => {
    const { store, bill, afterReply } = await fixture(true);
    const priced = await bill(delivered);
    expect(priced.billedNano).toBe(2_600_000n);
    expect(afterReply).toHaveLength(0);
    expect(await charges(store)).toEqual([[GENERATION, -2_600_000n]]);
    expect(await store.getAccount('acct-1')).toMatchObject({
      balanceNano: BALANCE - 2_600_000n,
      heldNano: 0n,
    });
    expect(store.holds.size).toBe(0);
  });

  it('counts a usage record the hold refused (an alarm), and still settles the request', async () => {
    const { store, bill } = await fixture(true);
    const denied = Object.assign(new Error('not authorized to perform: dynamodb:UpdateItem'), {
      name: 'AccessDeniedException',
    });
    store.recordUsageOnHold = async () => Promise.reject(denied);
    const before = usageRecordFailures.count;
    const priced = await bill(delivered);
    expect(usageRecordFailures.count).toBe(before + 1);
    expect(await charges(store)).toEqual([[GENERATION, -priced.billedNano]]);
    expect(store.holds.size).toBe(0);
  });

  it('bills a generation once: a second call is refused and writes nothing', async () => {
    const { store, bill, afterReply } = await fixture(false);
    await bill(delivered);
    await expect(bill({ ...delivered, text: 'more' })).rejects.toThrow('a generation is billed once');
    await Promise.all(afterReply);
    expect(afterReply).toHaveLength(1);
    expect(await charges(store)).toEqual([[GENERATION, -2_600_000n]]);
  });

  it('lets a priced bill be settled again without a second charge (idempotent by generation id)', async () => {
    const { store, bill, afterReply, billable } = await fixture(false);
    const priced = await bill(delivered);
    await Promise.all(afterReply);
    expect(await settle(priced, billable, store)).toBe('settled');
    expect(await charges(store)).toEqual([[GENERATION, -2_600_000n]]);
    expect((await store.getAccount('acct-1'))?.balanceNano).toBe(BALANCE - 2_600_000n);
  });
});
