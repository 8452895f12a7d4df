import { describe, expect, it } from 'vitest';
import { createAccountKey, revokeAccountKey } from '../../../functions/dashboard/accounts.js';
import { MemoryStore } from '../../support/memory-store.js';

/** A key made or revoked on the dashboard by a member: it records its maker, each change its entry. */
describe('key changes with their maker', () => {
  it('records who made the key and writes each change with its entry, never the key', async () => {
    const store = new MemoryStore();
    await store.createAccount('acct', 0n, '2026-12-07T10:00:00.000Z');
    const by = {
      actor: { kind: 'member' as const, subject: 'sub-ann', email: 'ann@example.com' },
      ip: '203.0.113.7',
      userAgent: 'Mozilla/5.0',
    };
    const { key, record } = await createAccountKey(store, 'acct', 'ci', '2026-12-07T10:00:01.000Z', by);
    expect((await store.getKey(record.keyHash))?.createdBy).toEqual({
      subject: 'sub-ann',
      email: 'ann@example.com',
    });
    await revokeAccountKey(store, 'acct', record.keyId, '2026-12-07T10:00:02.000Z', by);
    const entries = store.audit.get('acct') ?? [];
    expect(entries.map((e) => [e.action, e.target, e.actor.subject, e.ip])).toEqual([
      ['key.created', record.keyId, 'sub-ann', '203.0.113.7'],
      ['key.revoked', record.keyId, 'sub-ann', '203.0.113.7'],
    ]);
    expect(JSON.stringify(entries)).not.toContain(key);
    // Without `by`, as before: no maker, no entry.
    const plain = await createAccountKey(store, 'acct', 'plain', '2026-12-07T10:00:03.000Z');
    expect((await store.getKey(plain.record.keyHash))?.createdBy).toBeUndefined();
    expect(store.audit.get('acct')).toHaveLength(2);
  });
});
