import { createHash, randomBytes } from 'node:crypto';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { generateApiKey } from '../../functions/core/auth.js';
import { InvitationError, MemberChangeError } from '../../functions/core/store-team.js';
import {
  type Actor,
  type AuditAction,
  auditEntry,
  type Member,
  type Role,
} from '../../functions/core/team.js';
import { ensureTables, ensureTeamTables, localClient } from '../../lib/local/dynamodb-local.js';
import { localTableNames } from '../../lib/local/stack.js';
import { localTeamTables } from '../support/team-tables.js';

/**
 * Members changed at once, on DynamoDB Local (the real engine's transactions): the owners count
 * keeps an owner whatever two admins do at the same moment, an invitation makes one member however
 * many accept it at once, a role change made against a role someone changed meanwhile is refused
 * (no lost update), and a change and its audit entry are written together or not at all.
 */
const tables = localTableNames(`races${randomBytes(3).toString('hex')}-`);
const client = localClient(inject('dynamoEndpoint'));
const store = new DynamoStore(client, tables);
beforeAll(async () => {
  await ensureTables(client, tables);
  await ensureTeamTables(client, localTeamTables());
});

const now = () => new Date().toISOString();
const admin = (n: number): Actor => ({ kind: 'member', subject: `admin-${n}` });
const entry = (accountId: string, action: AuditAction, n = 0) =>
  auditEntry(accountId, admin(n), action, now());
const sha = (text: string) => createHash('sha256').update(text).digest('hex');

/** An account whose members have these roles (`m0`, `m1`, ...), `m0` its first owner. */
async function teamOf(roles: Role[]): Promise<string> {
  const accountId = `race-${randomBytes(5).toString('hex')}`;
  await store.createAccount(accountId, 0n, now());
  const member = (i: number): Member => ({
    accountId,
    subject: `m${i}`,
    email: `m${i}@example.com`,
    role: 'owner',
    joinedAt: now(),
  });
  await store.addFirstOwner(member(0), entry(accountId, 'member.joined'));
  for (let i = 1; i < roles.length; i++) {
    const token = randomBytes(8).toString('hex');
    const invitationId = `inv-${i}`;
    await store.createInvitation(
      {
        accountId,
        invitationId,
        tokenHash: sha(token),
        email: `m${i}@example.com`,
        role: roles[i] ?? 'viewer',
        invitedBy: 'm0',
        createdAt: now(),
        expiresAt: Math.floor(Date.now() / 1000) + 3600,
      },
      entry(accountId, 'member.invited'),
    );
    await store.acceptInvitation(
      accountId,
      invitationId,
      sha(token),
      { subject: `m${i}`, email: `m${i}@example.com` },
      now(),
      entry(accountId, 'member.joined'),
    );
  }
  if (roles[0] && roles[0] !== 'owner') throw new Error('the first member is an owner');
  return accountId;
}

async function ownersCount(accountId: string): Promise<number> {
  const out = await client.send(
    new GetItemCommand({
      TableName: localTeamTables().team,
      Key: { accountId: { S: accountId }, sk: { S: 'owners' } },
      ConsistentRead: true,
    }),
  );
  return Number(out.Item?.count?.N);
}

async function entriesOf(accountId: string, action: AuditAction): Promise<number> {
  return (await store.listAudit(accountId, { limit: 100, actions: [action] })).entries.length;
}

describe('members changed at once (DynamoDB Local)', () => {
  it('two admins demoting the two owners at once: one is refused, the account keeps an owner', async () => {
    for (let round = 0; round < 5; round++) {
      const accountId = await teamOf(['owner', 'owner', 'admin', 'admin']);
      const results = await Promise.allSettled([
        store.changeRole(accountId, 'm0', 'owner', 'viewer', entry(accountId, 'member.role_changed', 2)),
        round % 2
          ? store.removeMember(accountId, 'm1', entry(accountId, 'member.removed', 3))
          : store.changeRole(accountId, 'm1', 'owner', 'viewer', entry(accountId, 'member.role_changed', 3)),
      ]);
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const refused = results.find((r) => r.status === 'rejected');
      expect(refused?.status === 'rejected' && refused.reason).toEqual(new MemberChangeError('last-owner'));
      const owners = (await store.listMembers(accountId)).filter((m) => m.role === 'owner');
      expect(owners).toHaveLength(1);
      expect(await ownersCount(accountId)).toBe(1);
      expect(
        (await entriesOf(accountId, 'member.role_changed')) + (await entriesOf(accountId, 'member.removed')),
      ).toBe(1);
    }
  });

  it('an invitation accepted twice at once makes one member and one entry', async () => {
    for (let round = 0; round < 5; round++) {
      const accountId = await teamOf(['owner']);
      const token = randomBytes(8).toString('hex');
      await store.createInvitation(
        {
          accountId,
          invitationId: 'once',
          tokenHash: sha(token),
          email: 'pat@example.com',
          role: 'developer',
          invitedBy: 'm0',
          createdAt: now(),
          expiresAt: Math.floor(Date.now() / 1000) + 3600,
        },
        entry(accountId, 'member.invited'),
      );
      // Two people signed in with the same address (or one in two tabs) follow the link at once.
      const accept = (subject: string) =>
        store.acceptInvitation(
          accountId,
          'once',
          sha(token),
          { subject, email: 'pat@example.com' },
          now(),
          entry(accountId, 'member.joined'),
        );
      const results = await Promise.allSettled([accept('pat-1'), accept(round % 2 ? 'pat-1' : 'pat-2')]);
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const refused = results.find((r) => r.status === 'rejected');
      expect(refused?.status === 'rejected' && refused.reason).toBeInstanceOf(InvitationError);
      expect(await store.listMembers(accountId)).toHaveLength(2);
      // The first owner's and the one accepted.
      expect(await entriesOf(accountId, 'member.joined')).toBe(2);
    }
  });

  it('role changes made at once against the same role: one wins, the others are refused, none lost', async () => {
    const accountId = await teamOf(['owner', 'viewer']);
    const targets: Role[] = ['developer', 'billing', 'admin', 'owner'];
    const results = await Promise.allSettled(
      targets.map((to, n) =>
        store.changeRole(accountId, 'm1', 'viewer', to, entry(accountId, 'member.role_changed', n)),
      ),
    );
    const won = results.flatMap((r, n) => (r.status === 'fulfilled' ? [targets[n]] : []));
    expect(won).toHaveLength(1);
    for (const r of results)
      if (r.status === 'rejected') expect(r.reason).toEqual(new MemberChangeError('changed'));
    expect((await store.getMember(accountId, 'm1'))?.role).toBe(won[0]);
    expect(await ownersCount(accountId)).toBe(won[0] === 'owner' ? 2 : 1);
    expect(await entriesOf(accountId, 'member.role_changed')).toBe(1);
  });

  it('a change whose transaction fails writes no entry, and an entry that cannot be written takes its change with it', async () => {
    const accountId = await teamOf(['owner', 'viewer']);
    // Refused (the last owner): no entry.
    await expect(
      store.changeRole(accountId, 'm0', 'owner', 'admin', entry(accountId, 'member.role_changed')),
    ).rejects.toEqual(new MemberChangeError('last-owner'));
    expect(await entriesOf(accountId, 'member.role_changed')).toBe(0);
    // An entry whose id is taken already cannot be written: nor can its change.
    const taken = entry(accountId, 'member.role_changed');
    await store.appendAudit(taken);
    await expect(store.changeRole(accountId, 'm1', 'viewer', 'admin', taken)).rejects.toThrow();
    expect((await store.getMember(accountId, 'm1'))?.role).toBe('viewer');
    const key = generateApiKey();
    await expect(
      store.createKey(
        {
          keyHash: key.keyHash,
          keyId: key.keyId,
          accountId,
          name: 'k',
          displayPrefix: key.displayPrefix,
          status: 'active',
          createdAt: now(),
        },
        { audit: taken },
      ),
    ).rejects.toThrow();
    expect(await store.getKey(key.keyHash)).toBeUndefined();
    await expect(store.topUp(accountId, 'pi_taken', 5n, now(), { audit: taken })).rejects.toThrow();
    expect(await store.getLedgerEntry(accountId, 'topup#pi_taken')).toBeUndefined();
    expect(await entriesOf(accountId, 'member.role_changed')).toBe(1);
  });
});
