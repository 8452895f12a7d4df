import { describe, expect, it } from 'vitest';
import type { Hold } from '../../../functions/core/store.js';
import { sweepExpiredHolds } from '../../../functions/sweeper/sweep.js';
import { MemoryStore } from '../../support/memory-store.js';

const hold = (holdId: string, expiresAt: number): Hold => ({
  accountId: 'acct',
  holdId,
  amountNano: 1_000n,
  expiresAt,
  createdAt: new Date(0).toISOString(),
});

describe('sweepExpiredHolds', () => {
  it('releases the expired holds, keeps the live ones, and gives their amounts back', async () => {
    const store = new MemoryStore();
    await store.createAccount('acct', 1_000_000n, new Date().toISOString());
    const now = 1_000_000;
    for (const h of [hold('gen-1-old', now - 1), hold('gen-2-edge', now), hold('gen-3-live', now + 1)])
      expect(await store.placeHold(h)).toBe('held');
    expect((await store.getAccount('acct'))?.heldNano).toBe(3_000n);
    expect(await sweepExpiredHolds(store, now)).toEqual({ examined: 3, released: 2, completed: 0 });
    expect((await store.listHolds()).map((h) => h.holdId)).toEqual(['gen-3-live']);
    expect((await store.getAccount('acct'))?.heldNano).toBe(1_000n);
  });

  it('does not count a hold someone else released first (its settlement, or another sweep)', async () => {
    const store = new MemoryStore();
    await store.createAccount('acct', 1_000_000n, new Date().toISOString());
    await store.placeHold(hold('gen-1-old', 5));
    const raced = Object.assign(Object.create(store) as MemoryStore, {
      releaseHold: async () => false,
    });
    expect(await sweepExpiredHolds(raced, 10)).toEqual({ examined: 1, released: 0, completed: 0 });
  });
});
