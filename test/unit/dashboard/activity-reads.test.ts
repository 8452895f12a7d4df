/**
 * Activity's reads are bounded: a view asks the store the same number of times whatever the number
 * of the account's keys (their totals in one pass; its DynamoDB calls are counted in
 * test/integration/key-usage-reads.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../support/memory-store.js';
import { accountOf, dashboard } from './support.js';

/** The store's calls during `act`, by method. */
async function storeCalls(store: MemoryStore, act: () => Promise<unknown>): Promise<string[]> {
  const calls: string[] = [];
  const names = Object.getOwnPropertyNames(MemoryStore.prototype).filter(
    (name) =>
      name !== 'constructor' && typeof (store as unknown as Record<string, unknown>)[name] === 'function',
  );
  const target = store as unknown as Record<string, (...args: unknown[]) => unknown>;
  const originals = new Map(names.map((name) => [name, target[name]]));
  for (const name of names) {
    const original = originals.get(name) as (...args: unknown[]) => unknown;
    target[name] = (...args: unknown[]) => {
      calls.push(name);
      return original.apply(store, args);
    };
  }
  try {
    await act();
  } finally {
    for (const name of names) delete target[name];
  }
  return calls.sort();
}

describe("Activity's reads", () => {
  it('are the same for an account with one key and with eight', async () => {
    const d = dashboard();
    const b = d.browser();
    await d.signIn(b, 'user-1');
    const accountId = accountOf(d.store, 'user-1');
    await d.post(b, '/dashboard/settings/api/keys', { name: 'first' });
    const view = async () => expect((await d.get(b, '/dashboard/activity')).status).toBe(200);
    const withOne = await storeCalls(d.store, view);
    for (let i = 2; i <= 8; i++) await d.post(b, '/dashboard/settings/api/keys', { name: `key ${i}` });
    expect(await d.store.listKeys(accountId)).toHaveLength(8);
    const withEight = await storeCalls(d.store, view);
    expect(withEight).toEqual(withOne);
  });
});
