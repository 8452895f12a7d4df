/**
 * The members of an account in DynamoDB (schema.ts TEAM_TABLE), found by TEAM_TABLE at first use.
 * Items of an account's partition: `member#<subject>` (one a member), `invite#<id>` (invitations.ts)
 * and `owners` (`count`: how many of its members are owners).
 *
 * Every change is one TransactWriteItems: the member's write, conditioned on the role it was made
 * against (no lost update: a change read against a role someone has changed since is refused), the
 * owners count's ADD when the number of owners changes, conditioned on the count staying at least 1
 * (two admins demoting the last two owners at once: one of them is refused), and the audit entry's
 * Put (audit.ts). All of it, or nothing. The transaction's ClientRequestToken is its entry's (and
 * attempt's), so a resend after a lost answer is that commit, not a second change.
 */
import type { GetItemCommandOutput } from '@aws-sdk/client-dynamodb';
import { MemberChangeError } from '../../core/store-team.js';
import type { AuditEntry, Member, Role } from '../../core/team.js';
import { withAudit } from './audit.js';
import { type Item, N, S, type TableNames } from './items.js';
import { INDEX } from './schema.js';
import { teamTableOf } from './side-tables.js';
import {
  cancellationReasons,
  isRetryableSettlementError,
  queryAll,
  requestToken,
  retried,
  StorePart,
  sortKeyPrefix,
} from './store-db.js';
import type { DynamoWire } from './wire.js';

export const memberKey = (accountId: string, subject: string): Item => ({
  accountId: S(accountId),
  sk: S(`member#${subject}`),
});

export function memberItem(member: Member): Item {
  return {
    ...memberKey(member.accountId, member.subject),
    subject: S(member.subject),
    // The byMember index's key: member items only (the index is sparse).
    memberSubject: S(member.subject),
    email: S(member.email),
    role: S(member.role),
    joinedAt: S(member.joinedAt),
    ...(member.invitedBy !== undefined ? { invitedBy: S(member.invitedBy) } : {}),
  };
}

function toMember(item: Item): Member {
  return {
    accountId: item.accountId?.S ?? '',
    subject: item.subject?.S ?? '',
    email: item.email?.S ?? '',
    role: (item.role?.S ?? 'viewer') as Role,
    joinedAt: item.joinedAt?.S ?? '',
    ...(item.invitedBy?.S !== undefined ? { invitedBy: item.invitedBy.S } : {}),
  };
}

/**
 * The owners count's change by `delta`, conditioned on the count after it being at least 1 (count >
 * -delta: DynamoDB's conditions have no arithmetic). With delta 0 it still checks the count is there.
 */
export function ownersUpdate(table: string, accountId: string, delta: number) {
  return {
    Update: {
      TableName: table,
      Key: { accountId: S(accountId), sk: S('owners') },
      UpdateExpression: 'ADD #count :delta',
      ConditionExpression: '#count > :floor',
      ExpressionAttributeNames: { '#count': 'count' },
      ExpressionAttributeValues: { ':delta': N(delta), ':floor': N(-delta) },
    },
  };
}

/** The role change of a member: SET role, conditioned on the role it was made against. */
function roleUpdate(table: string, accountId: string, subject: string, from: Role, to: Role) {
  return {
    Update: {
      TableName: table,
      Key: memberKey(accountId, subject),
      UpdateExpression: 'SET #role = :to',
      ConditionExpression: '#role = :from',
      ExpressionAttributeNames: { '#role': 'role' },
      ExpressionAttributeValues: { ':to': S(to), ':from': S(from) },
    },
  };
}

const ownerDelta = (from: Role | undefined, to: Role | undefined): number =>
  (to === 'owner' ? 1 : 0) - (from === 'owner' ? 1 : 0);

/**
 * Sends `items` and the entry as one transaction, again while DynamoDB cancels it for contention or
 * throttling; returns the index of the first item whose condition failed (nothing written), or
 * undefined once it is written.
 */
export async function teamTransact(
  wire: DynamoWire,
  tables: TableNames,
  items: object[],
  entry: AuditEntry,
  attempt = 1,
): Promise<number | undefined> {
  try {
    await retried(
      () =>
        wire.call('TransactWriteItems', {
          ClientRequestToken: requestToken('team', `${entry.entryId}:${attempt}`),
          TransactItems: withAudit(items, entry, tables),
        }),
      isRetryableSettlementError,
    );
    return undefined;
  } catch (error) {
    const failed = cancellationReasons(error)?.findIndex((r) => r.Code === 'ConditionalCheckFailed') ?? -1;
    // The entry's own condition (an id that exists): not a refusal of the change.
    if (failed < 0 || failed >= items.length) throw error;
    return failed;
  }
}

export class Team extends StorePart {
  private table(): string {
    return teamTableOf(this.tables);
  }

  async addFirstOwner(member: Member, audit: AuditEntry): Promise<boolean> {
    const table = this.table();
    const failed = await teamTransact(
      this.wire,
      this.tables,
      [
        {
          Put: {
            TableName: table,
            Item: { accountId: S(member.accountId), sk: S('owners'), count: N(1) },
            ConditionExpression: 'attribute_not_exists(sk)',
          },
        },
        {
          Put: {
            TableName: table,
            Item: memberItem({ ...member, role: 'owner' }),
            ConditionExpression: 'attribute_not_exists(sk)',
          },
        },
      ],
      audit,
    );
    return failed === undefined;
  }

  async getMember(accountId: string, subject: string): Promise<Member | undefined> {
    const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: this.table(),
      Key: memberKey(accountId, subject),
      ConsistentRead: true,
    });
    return out.Item ? toMember(out.Item) : undefined;
  }

  async listMembers(accountId: string): Promise<Member[]> {
    const prefix = sortKeyPrefix('sk', 'member#');
    const items = await queryAll(this.wire, {
      TableName: this.table(),
      KeyConditionExpression: `accountId = :accountId AND ${prefix.condition}`,
      ExpressionAttributeValues: { ':accountId': S(accountId), ...prefix.values },
      ConsistentRead: true,
    });
    return items
      .map(toMember)
      .sort((a, b) => a.joinedAt.localeCompare(b.joinedAt) || a.subject.localeCompare(b.subject));
  }

  /** The byMember index (eventually consistent, as every index): oldest membership first. */
  async membershipsOf(subject: string): Promise<Member[]> {
    const items = await queryAll(this.wire, {
      TableName: this.table(),
      IndexName: INDEX.membersBySubject,
      KeyConditionExpression: 'memberSubject = :subject',
      ExpressionAttributeValues: { ':subject': S(subject) },
    });
    return items.map(toMember);
  }

  async changeRole(
    accountId: string,
    subject: string,
    from: Role,
    to: Role,
    audit: AuditEntry,
  ): Promise<Member> {
    const member = await this.getMember(accountId, subject);
    if (!member) throw new MemberChangeError('not-found');
    if (member.role !== from) throw new MemberChangeError('changed');
    const delta = ownerDelta(from, to);
    const failed = await teamTransact(
      this.wire,
      this.tables,
      [
        roleUpdate(this.table(), accountId, subject, from, to),
        ...(delta !== 0 ? [ownersUpdate(this.table(), accountId, delta)] : []),
      ],
      audit,
    );
    if (failed === 0) throw await this.refusalOf(accountId, subject);
    if (failed === 1) throw new MemberChangeError('last-owner');
    return { ...member, role: to };
  }

  /** Why the member's write failed its condition: gone, or its role changed. */
  private async refusalOf(accountId: string, subject: string): Promise<MemberChangeError> {
    return new MemberChangeError((await this.getMember(accountId, subject)) ? 'changed' : 'not-found');
  }

  /**
   * The member's item deleted, conditioned on the role read (an owner's removal takes one from the
   * count, never the last); read again if it changed meanwhile. Revokes nothing: keys are the account's.
   */
  async removeMember(accountId: string, subject: string, audit: AuditEntry): Promise<void> {
    for (let attempt = 1; attempt <= 3; attempt++) {
      const member = await this.getMember(accountId, subject);
      if (!member) throw new MemberChangeError('not-found');
      const owner = member.role === 'owner';
      const failed = await teamTransact(
        this.wire,
        this.tables,
        [
          {
            Delete: {
              TableName: this.table(),
              Key: memberKey(accountId, subject),
              ConditionExpression: '#role = :role',
              ExpressionAttributeNames: { '#role': 'role' },
              ExpressionAttributeValues: { ':role': S(member.role) },
            },
          },
          ...(owner ? [ownersUpdate(this.table(), accountId, -1)] : []),
        ],
        audit,
        attempt,
      );
      if (failed === undefined) return;
      if (failed === 1) throw new MemberChangeError('last-owner');
    }
    throw new MemberChangeError('changed');
  }

  /**
   * `to` made an owner and `from` (an owner) made `fromBecomes`, each conditioned on the role read,
   * with the owners count's change (-1, 0 or +1) conditioned on it staying at least 1.
   */
  async transferOwnership(
    accountId: string,
    from: string,
    to: string,
    fromBecomes: Role,
    audit: AuditEntry,
  ): Promise<void> {
    const [giver, taker] = await Promise.all([
      this.getMember(accountId, from),
      this.getMember(accountId, to),
    ]);
    if (!giver || !taker || from === to) throw new MemberChangeError('not-found');
    if (giver.role !== 'owner') throw new MemberChangeError('changed');
    const delta = ownerDelta(taker.role, 'owner') + ownerDelta('owner', fromBecomes);
    const failed = await teamTransact(
      this.wire,
      this.tables,
      [
        roleUpdate(this.table(), accountId, to, taker.role, 'owner'),
        roleUpdate(this.table(), accountId, from, 'owner', fromBecomes),
        ownersUpdate(this.table(), accountId, delta),
      ],
      audit,
    );
    if (failed === 0) throw await this.refusalOf(accountId, to);
    if (failed === 1) throw await this.refusalOf(accountId, from);
    if (failed === 2) throw new MemberChangeError('last-owner');
  }
}
