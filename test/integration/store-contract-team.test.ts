import { createHash, randomBytes } from 'node:crypto';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { generateApiKey } from '../../functions/core/auth.js';
import { KeyNotFoundError, type Store } from '../../functions/core/store.js';
import { InvitationError, MemberChangeError } from '../../functions/core/store-team.js';
import {
  type Actor,
  AUDIT_RETENTION_DAYS,
  type AuditAction,
  auditEntry,
  INVITATION_TTL_SECONDS,
  type Invitation,
  type Member,
} from '../../functions/core/team.js';
import { ensureTables, ensureTeamTables, localClient } from '../../lib/local/dynamodb-local.js';
import { localTableNames } from '../../lib/local/stack.js';
import { MemoryStore } from '../support/memory-store.js';
import { localTeamTables } from '../support/team-tables.js';

/**
 * The store port's part for members, invitations and the audit log (core/store-team.ts), and the
 * audit entries of the store's own writes, run against both implementations, as store-contract.test.ts.
 */
const tables = localTableNames(`team${randomBytes(3).toString('hex')}-`);
const client = localClient(inject('dynamoEndpoint'));
beforeAll(async () => {
  await ensureTables(client, tables);
  await ensureTeamTables(client, localTeamTables());
});

const stores: [string, () => Store][] = [
  ['in memory', () => new MemoryStore()],
  ['DynamoDB', () => new DynamoStore(client, tables)],
];

/** A clock that moves on a millisecond at each reading: entries made one after another sort so. */
let last = 0;
const now = () => {
  last = Math.max(last + 1, Date.now());
  return new Date(last).toISOString();
};
const alice: Actor = { kind: 'member', subject: 'sub-alice', email: 'alice@example.com' };
const sha = (text: string) => createHash('sha256').update(text).digest('hex');

describe.each(stores)('the team store %s', (name, make) => {
  const store = make();
  const entry = (accountId: string, action: AuditAction, target?: string) =>
    auditEntry(accountId, alice, action, now(), target ? { target } : {});
  const member = (accountId: string, subject: string, role: Member['role'] = 'developer'): Member => ({
    accountId,
    subject,
    email: `${subject}@example.com`,
    role,
    joinedAt: now(),
  });

  /** A new account with its first owner `owner`. */
  async function team() {
    const accountId = `team-${randomBytes(5).toString('hex')}`;
    await store.createAccount(accountId, 0n, now());
    expect(
      await store.addFirstOwner(member(accountId, 'owner-1', 'owner'), entry(accountId, 'member.joined')),
    ).toBe(true);
    return accountId;
  }

  /** An invitation of `email` as `role`, and the token its link carries. */
  async function invite(
    accountId: string,
    email: string,
    role: Member['role'] = 'developer',
    expiresIn = INVITATION_TTL_SECONDS,
  ) {
    const token = randomBytes(16).toString('hex');
    const invitation: Invitation = {
      accountId,
      invitationId: randomBytes(6).toString('hex'),
      tokenHash: sha(token),
      email,
      role,
      invitedBy: 'owner-1',
      createdAt: now(),
      expiresAt: Math.floor(Date.now() / 1000) + expiresIn,
    };
    await store.createInvitation(invitation, entry(accountId, 'member.invited', invitation.invitationId));
    return { invitation, token };
  }

  async function actions(accountId: string): Promise<string[]> {
    return (await store.listAudit(accountId, { limit: 100 })).entries.map((e) => e.action);
  }

  it('makes the first owner once, and reads members back strongly consistently', async () => {
    const accountId = await team();
    expect(
      await store.addFirstOwner(member(accountId, 'someone', 'owner'), entry(accountId, 'member.joined')),
    ).toBe(false);
    expect(await store.getMember(accountId, 'owner-1')).toMatchObject({
      role: 'owner',
      email: 'owner-1@example.com',
    });
    expect(await store.getMember(accountId, 'someone')).toBeUndefined();
    expect((await store.listMembers(accountId)).map((m) => m.subject)).toEqual(['owner-1']);
    // One entry: the refused second owner wrote none.
    expect(await actions(accountId)).toEqual(['member.joined']);
  });

  it('accepts an invitation once, bound to its address, token and time; the member and the entry together', async () => {
    const accountId = await team();
    const { invitation, token } = await invite(accountId, 'Bob@Example.com', 'admin');
    expect(await store.listInvitations(accountId, Math.floor(Date.now() / 1000))).toMatchObject([
      { invitationId: invitation.invitationId, email: 'bob@example.com', role: 'admin' },
    ]);
    const bob = { subject: 'sub-bob', email: 'BOB@example.com' };
    const accept = (hash: string, person = bob) =>
      store.acceptInvitation(
        accountId,
        invitation.invitationId,
        hash,
        person,
        now(),
        entry(accountId, 'member.joined'),
      );
    await expect(accept(sha('wrong'))).rejects.toEqual(new InvitationError('unknown'));
    await expect(accept(sha(token), { subject: 'sub-eve', email: 'eve@example.com' })).rejects.toEqual(
      new InvitationError('wrong-email'),
    );
    expect(await accept(sha(token))).toMatchObject({
      subject: 'sub-bob',
      role: 'admin',
      invitedBy: 'owner-1',
    });
    await expect(accept(sha(token))).rejects.toBeInstanceOf(InvitationError);
    expect(await store.getInvitation(accountId, invitation.invitationId)).toBeUndefined();
    expect((await store.membershipsOf('sub-bob')).map((m) => m.accountId)).toContain(accountId);
    expect(await actions(accountId)).toEqual(['member.joined', 'member.invited', 'member.joined']);

    const late = await invite(accountId, 'carol@example.com', 'viewer', -1);
    await expect(
      store.acceptInvitation(
        accountId,
        late.invitation.invitationId,
        sha(late.token),
        { subject: 'c', email: 'carol@example.com' },
        now(),
        entry(accountId, 'member.joined'),
      ),
    ).rejects.toEqual(new InvitationError('expired'));
    expect(await store.listInvitations(accountId, Math.floor(Date.now() / 1000))).toEqual([]);
    const again = await invite(accountId, 'bob@example.com');
    await expect(
      store.acceptInvitation(
        accountId,
        again.invitation.invitationId,
        sha(again.token),
        bob,
        now(),
        entry(accountId, 'member.joined'),
      ),
    ).rejects.toEqual(new InvitationError('already-member'));
  });

  it('revokes an invitation once, with its entry', async () => {
    const accountId = await team();
    const { invitation } = await invite(accountId, 'dan@example.com');
    await store.revokeInvitation(
      accountId,
      invitation.invitationId,
      entry(accountId, 'member.invitation_revoked'),
    );
    await expect(
      store.revokeInvitation(
        accountId,
        invitation.invitationId,
        entry(accountId, 'member.invitation_revoked'),
      ),
    ).rejects.toEqual(new MemberChangeError('not-found'));
    expect(await actions(accountId)).toEqual([
      'member.invitation_revoked',
      'member.invited',
      'member.joined',
    ]);
  });

  it('never leaves an account without an owner, and changes a role only from the role it was made against', async () => {
    const accountId = await team();
    const demote = () =>
      store.changeRole(accountId, 'owner-1', 'owner', 'admin', entry(accountId, 'member.role_changed'));
    await expect(demote()).rejects.toEqual(new MemberChangeError('last-owner'));
    await expect(
      store.removeMember(accountId, 'owner-1', entry(accountId, 'member.removed')),
    ).rejects.toEqual(new MemberChangeError('last-owner'));
    const { invitation, token } = await invite(accountId, 'erin@example.com', 'viewer');
    await store.acceptInvitation(
      accountId,
      invitation.invitationId,
      sha(token),
      { subject: 'erin', email: 'erin@example.com' },
      now(),
      entry(accountId, 'member.joined'),
    );
    await expect(
      store.changeRole(accountId, 'erin', 'developer', 'billing', entry(accountId, 'member.role_changed')),
    ).rejects.toEqual(new MemberChangeError('changed'));
    await expect(
      store.changeRole(accountId, 'nobody', 'viewer', 'billing', entry(accountId, 'member.role_changed')),
    ).rejects.toEqual(new MemberChangeError('not-found'));
    expect(
      await store.changeRole(accountId, 'erin', 'viewer', 'owner', entry(accountId, 'member.role_changed')),
    ).toMatchObject({ role: 'owner' });
    // Two owners now: one may be demoted, then the other is the last.
    expect(await demote()).toMatchObject({ role: 'admin' });
    await expect(store.removeMember(accountId, 'erin', entry(accountId, 'member.removed'))).rejects.toEqual(
      new MemberChangeError('last-owner'),
    );
    await store.transferOwnership(
      accountId,
      'erin',
      'owner-1',
      'viewer',
      entry(accountId, 'ownership.transferred'),
    );
    expect((await store.listMembers(accountId)).map((m) => [m.subject, m.role])).toEqual([
      ['owner-1', 'owner'],
      ['erin', 'viewer'],
    ]);
    await store.removeMember(accountId, 'erin', entry(accountId, 'member.removed'));
    expect(await store.getMember(accountId, 'erin')).toBeUndefined();
    // Refused changes wrote no entry.
    expect((await actions(accountId)).reverse()).toEqual([
      'member.joined',
      'member.invited',
      'member.joined',
      'member.role_changed',
      'member.role_changed',
      'ownership.transferred',
      'member.removed',
    ]);
  });

  it("removing a member revokes nothing of the account's", async () => {
    const accountId = await team();
    const key = generateApiKey();
    const record = {
      keyHash: key.keyHash,
      keyId: key.keyId,
      accountId,
      name: 'k',
      displayPrefix: key.displayPrefix,
      status: 'active' as const,
      createdAt: now(),
    };
    await store.createKey(
      { ...record, createdBy: { subject: 'erin', email: 'erin@example.com' } },
      { audit: entry(accountId, 'key.created', key.keyId) },
    );
    const { invitation, token } = await invite(accountId, 'erin@example.com');
    await store.acceptInvitation(
      accountId,
      invitation.invitationId,
      sha(token),
      { subject: 'erin', email: 'erin@example.com' },
      now(),
      entry(accountId, 'member.joined'),
    );
    await store.removeMember(accountId, 'erin', entry(accountId, 'member.removed'));
    expect(await store.getKey(key.keyHash)).toMatchObject({
      status: 'active',
      createdBy: { subject: 'erin', email: 'erin@example.com' },
    });
  });

  it("writes each key and credit change's entry with it, never without it, and no entry for a change not made", async () => {
    const accountId = await team();
    const key = generateApiKey();
    const record = {
      keyHash: key.keyHash,
      keyId: key.keyId,
      accountId,
      name: 'k',
      displayPrefix: key.displayPrefix,
      status: 'active' as const,
      createdAt: now(),
    };
    await store.createKey(record, { maxActive: 5, audit: entry(accountId, 'key.created', key.keyId) });
    await store.renameKey(accountId, key.keyId, 'renamed', entry(accountId, 'key.renamed', key.keyId));
    await expect(
      store.renameKey(accountId, key.keyId, 'a\nb', entry(accountId, 'key.renamed')),
    ).rejects.toBeInstanceOf(RangeError);
    await expect(
      store.renameKey('other', key.keyId, 'x', entry(accountId, 'key.renamed')),
    ).rejects.toBeInstanceOf(KeyNotFoundError);
    await store.setKeyDailyCap(accountId, key.keyId, 5_000n, {
      audit: entry(accountId, 'key.cap_changed', key.keyId),
    });
    expect(await store.getKey(key.keyHash)).toMatchObject({ name: 'renamed', dailyCapNano: 5_000n });
    await store.setKeyDailyCap(accountId, key.keyId, undefined, {
      audit: entry(accountId, 'key.cap_changed', key.keyId),
    });
    expect((await store.getKey(key.keyHash))?.dailyCapNano).toBeUndefined();
    await store.revokeKey(key.keyHash, now(), { audit: entry(accountId, 'key.revoked', key.keyId) });
    // Revoked already: nothing changes, no entry.
    await store.revokeKey(key.keyHash, now(), { audit: entry(accountId, 'key.revoked', key.keyId) });
    const stripe = (action: AuditAction) =>
      auditEntry(accountId, { kind: 'stripe' }, action, now(), { target: 'pi_1' });
    expect(await store.topUp(accountId, 'pi_1', 25_000n, now(), { audit: stripe('purchase') })).toBe(true);
    expect(await store.topUp(accountId, 'pi_1', 25_000n, now(), { audit: stripe('purchase') })).toBe(false);
    expect(await store.removeCredits(accountId, 'refund-1', 1_000n, now(), { audit: stripe('refund') })).toBe(
      'applied',
    );
    expect(await store.removeCredits(accountId, 'refund-1', 1_000n, now(), { audit: stripe('refund') })).toBe(
      'already-applied',
    );
    expect(
      await store.removeCredits(accountId, 'refund-2', 10n ** 12n, now(), { audit: stripe('refund') }),
    ).toBe('refused');
    expect((await actions(accountId)).reverse()).toEqual([
      'member.joined',
      'key.created',
      'key.renamed',
      'key.cap_changed',
      'key.cap_changed',
      'key.revoked',
      'purchase',
      'refund',
    ]);
  });

  it('pages the log newest first, filtered by time, action and actor, an entry holding what it was given', async () => {
    const accountId = `audit-${randomBytes(5).toString('hex')}`;
    const bob: Actor = { kind: 'member', subject: 'sub-bob' };
    const at = (second: number) => `2026-12-07T10:00:${String(second).padStart(2, '0')}.000Z`;
    for (let second = 0; second < 10; second++)
      await store.appendAudit(
        auditEntry(accountId, second % 2 ? bob : alice, second % 3 ? 'key.created' : 'purchase', at(second), {
          target: `k${second}`,
          details: { n: String(second) },
          ip: '203.0.113.9',
          userAgent: 'x'.repeat(300),
        }),
      );
    const first = await store.listAudit(accountId, { limit: 4 });
    expect(first.entries.map((e) => e.target)).toEqual(['k9', 'k8', 'k7', 'k6']);
    expect(first.entries[0]).toMatchObject({
      actor: bob,
      action: 'purchase',
      details: { n: '9' },
      ip: '203.0.113.9',
      at: at(9),
    });
    const rest = await store.listAudit(accountId, {
      limit: 10,
      ...(first.next ? { after: first.next } : {}),
    });
    expect(rest.entries.map((e) => e.target)).toEqual(['k5', 'k4', 'k3', 'k2', 'k1', 'k0']);
    expect(rest.next).toBeUndefined();
    const filtered = await store.listAudit(accountId, {
      limit: 2,
      since: at(1),
      until: at(9),
      actions: ['key.created'],
      actorSubject: 'sub-bob',
    });
    expect(filtered.entries.map((e) => e.target)).toEqual(['k7', 'k5']);
    const next = await store.listAudit(accountId, {
      limit: 2,
      since: at(1),
      until: at(9),
      actions: ['key.created'],
      actorSubject: 'sub-bob',
      ...(filtered.next ? { after: filtered.next } : {}),
    });
    expect(next.entries.map((e) => e.target)).toEqual(['k1']);
    expect(next.next).toBeUndefined();
    if (name === 'DynamoDB') {
      // The TTL attribute: AUDIT_RETENTION_DAYS after the entry, in epoch seconds; the User-Agent kept to 256.
      const item = await client.send(
        new GetItemCommand({
          TableName: localTeamTables().audit,
          Key: { accountId: { S: accountId }, entryId: { S: first.entries[0]?.entryId ?? '' } },
        }),
      );
      expect(Number(item.Item?.expiresAt?.N)).toBe(Date.parse(at(9)) / 1000 + AUDIT_RETENTION_DAYS * 86_400);
      expect(item.Item?.userAgent?.S).toHaveLength(256);
    }
  });
});
