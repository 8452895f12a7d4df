import { chargeEntry } from './fixtures.js';
import { MemoryStore } from './memory-store.js';

/**
 * The operator CLI's context over an in-memory store holding account `acct` with one charge of
 * $0.000013 (10 prompt and 5 completion tokens of svc-fast) per `user`, a second apart from
 * 2026-01-01, in order: what the usage exports are tried on.
 */
export async function accountWithUsers(users: readonly string[]) {
  const store = new MemoryStore();
  await store.createAccount('acct', 1_000_000_000n, new Date().toISOString());
  for (const [i, user] of users.entries()) {
    const n = i + 1;
    await store.settleCharge(
      chargeEntry('acct', 'key_1', 13_000n, {
        generationId: `gen-1767225600-${String(n).padStart(20, '0')}`,
        upstreamCostUsd: '0.00001',
        user,
        createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(),
      }),
    );
  }
  return { store: store as never };
}
