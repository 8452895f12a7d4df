/**
 * Invitations in DynamoDB: `invite#<invitationId>` items of the account's partition of the team
 * table (team.ts). The item keeps the SHA-256 of the link's token, never the token; `expiresAt` is
 * the table's TTL attribute, so an invitation never accepted is deleted some days after it expired
 * (refused from its expiry on, whenever TTL gets to it).
 *
 * Accepting is single use: one transaction deletes the invitation, conditioned on it being there
 * with that token's hash and not expired, puts the member (conditioned on the person not being one),
 * adds an owner to the count for an owner's invitation, and puts the audit entry. Of two accepts at
 * once, one deletes it and the other's condition fails: one member, one entry.
 */
import type { GetItemCommandOutput } from '@aws-sdk/client-dynamodb';
import { InvitationError, MemberChangeError } from '../../core/store-team.js';
import type { AuditEntry, Invitation, Member, Role } from '../../core/team.js';
import { type Item, N, S } from './items.js';
import { teamTableOf } from './side-tables.js';
import { queryAll, StorePart, sortKeyPrefix } from './store-db.js';
import { memberItem, memberKey, ownersUpdate, teamTransact } from './team.js';

const inviteKey = (accountId: string, invitationId: string): Item => ({
  accountId: S(accountId),
  sk: S(`invite#${invitationId}`),
});

function inviteItem(invitation: Invitation): Item {
  return {
    ...inviteKey(invitation.accountId, invitation.invitationId),
    invitationId: S(invitation.invitationId),
    tokenHash: S(invitation.tokenHash),
    email: S(invitation.email.toLowerCase()),
    role: S(invitation.role),
    invitedBy: S(invitation.invitedBy),
    createdAt: S(invitation.createdAt),
    expiresAt: N(invitation.expiresAt),
  };
}

function toInvitation(item: Item): Invitation {
  return {
    accountId: item.accountId?.S ?? '',
    invitationId: item.invitationId?.S ?? '',
    tokenHash: item.tokenHash?.S ?? '',
    email: item.email?.S ?? '',
    role: (item.role?.S ?? 'viewer') as Role,
    invitedBy: item.invitedBy?.S ?? '',
    createdAt: item.createdAt?.S ?? '',
    expiresAt: Number(item.expiresAt?.N ?? '0'),
  };
}

export class Invitations extends StorePart {
  async createInvitation(invitation: Invitation, audit: AuditEntry): Promise<void> {
    const failed = await teamTransact(
      this.wire,
      this.tables,
      [
        {
          Put: {
            TableName: teamTableOf(this.tables),
            Item: inviteItem(invitation),
            ConditionExpression: 'attribute_not_exists(sk)',
          },
        },
      ],
      audit,
    );
    if (failed !== undefined) throw new Error(`invitation ${invitation.invitationId} exists`);
  }

  /** The account's invitations not expired at `nowSeconds`, oldest first. */
  async listInvitations(accountId: string, nowSeconds: number): Promise<Invitation[]> {
    const prefix = sortKeyPrefix('sk', 'invite#');
    const items = await queryAll(this.wire, {
      TableName: teamTableOf(this.tables),
      KeyConditionExpression: `accountId = :accountId AND ${prefix.condition}`,
      ExpressionAttributeValues: { ':accountId': S(accountId), ...prefix.values },
      ConsistentRead: true,
    });
    return items
      .map(toInvitation)
      .filter((i) => i.expiresAt > nowSeconds)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.invitationId.localeCompare(b.invitationId));
  }

  async getInvitation(accountId: string, invitationId: string): Promise<Invitation | undefined> {
    const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: teamTableOf(this.tables),
      Key: inviteKey(accountId, invitationId),
      ConsistentRead: true,
    });
    return out.Item ? toInvitation(out.Item) : undefined;
  }

  async revokeInvitation(accountId: string, invitationId: string, audit: AuditEntry): Promise<void> {
    const failed = await teamTransact(
      this.wire,
      this.tables,
      [
        {
          Delete: {
            TableName: teamTableOf(this.tables),
            Key: inviteKey(accountId, invitationId),
            ConditionExpression: 'attribute_exists(sk)',
          },
        },
      ],
      audit,
    );
    if (failed !== undefined) throw new MemberChangeError('not-found');
  }

  /**
   * Read first, for the refusal to say why (unknown, expired, another address, a member already);
   * then the one transaction, whose conditions hold it whatever happened since the read: 'used' when
   * the invitation is no longer there as read (accepted or revoked meanwhile), 'already-member' when
   * the person became a member meanwhile. A wrong token is 'unknown', as an invitation that is not.
   */
  async acceptInvitation(
    accountId: string,
    invitationId: string,
    tokenHash: string,
    person: { subject: string; email: string },
    now: string,
    audit: AuditEntry,
  ): Promise<Member> {
    const nowSeconds = Math.floor(Date.parse(now) / 1000);
    const invitation = await this.getInvitation(accountId, invitationId);
    if (!invitation || invitation.tokenHash !== tokenHash) throw new InvitationError('unknown');
    if (invitation.expiresAt <= nowSeconds) throw new InvitationError('expired');
    if (invitation.email !== person.email.toLowerCase()) throw new InvitationError('wrong-email');
    const table = teamTableOf(this.tables);
    const existing = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: table,
      Key: memberKey(accountId, person.subject),
      ConsistentRead: true,
    });
    if (existing.Item) throw new InvitationError('already-member');
    const member: Member = {
      accountId,
      subject: person.subject,
      email: person.email,
      role: invitation.role,
      joinedAt: now,
      invitedBy: invitation.invitedBy,
    };
    const failed = await teamTransact(
      this.wire,
      this.tables,
      [
        {
          Delete: {
            TableName: table,
            Key: inviteKey(accountId, invitationId),
            ConditionExpression: 'attribute_exists(sk) AND tokenHash = :hash AND expiresAt > :now',
            ExpressionAttributeValues: { ':hash': S(tokenHash), ':now': N(nowSeconds) },
          },
        },
        {
          Put: {
            TableName: table,
            Item: memberItem(member),
            ConditionExpression: 'attribute_not_exists(sk)',
          },
        },
        ...(member.role === 'owner' ? [ownersUpdate(table, accountId, 1)] : []),
      ],
      audit,
    );
    if (failed === 0) throw new InvitationError('used');
    if (failed === 1) throw new InvitationError('already-member');
    if (failed === 2) throw new Error(`account ${accountId} has no count of owners`);
    return member;
  }
}
