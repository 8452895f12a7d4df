/**
 * The audit log in DynamoDB (schema.ts AUDIT_TABLE): one item an entry, keyed by account and entry
 * id (its time first, so the partition read backwards is newest first). An entry is written as a Put
 * of the transaction that makes the change it records (withAudit, used by the key, ledger, correction
 * and team writes), conditioned on its id being new; only appendAudit writes one alone. Nothing
 * updates or deletes an entry: DynamoDB's TTL removes it AUDIT_RETENTION_DAYS after it was made
 * (`expiresAt`). The entry never holds a secret: the callers give ids, prefixes and plain facts.
 */
import type { QueryCommandOutput } from '@aws-sdk/client-dynamodb';
import {
  type Actor,
  type AuditEntry,
  type AuditPage,
  type AuditQuery,
  auditExpiry,
} from '../../core/team.js';
import { type Item, N, S, type TableNames } from './items.js';
import { auditTableOf } from './side-tables.js';
import { StorePart } from './store-db.js';

function auditItem(entry: AuditEntry): Item {
  const { actor } = entry;
  const text = (name: string, value: string | undefined) => (value === undefined ? {} : { [name]: S(value) });
  return {
    accountId: S(entry.accountId),
    entryId: S(entry.entryId),
    at: S(entry.at),
    action: S(entry.action),
    actorKind: S(actor.kind),
    ...text('actorSubject', actor.subject),
    ...text('actorEmail', actor.email),
    ...text('target', entry.target),
    ...text('ip', entry.ip),
    ...text('userAgent', entry.userAgent?.slice(0, 256)),
    ...(entry.details
      ? { details: { M: Object.fromEntries(Object.entries(entry.details).map(([k, v]) => [k, S(v)])) } }
      : {}),
    expiresAt: N(auditExpiry(entry.at)),
  };
}

/** The Put of `entry` in a transaction (TransactWriteItems' item), refused if its id exists already. */
function auditPut(entry: AuditEntry, tables: TableNames) {
  return {
    Put: {
      TableName: auditTableOf(tables),
      Item: auditItem(entry),
      ConditionExpression: 'attribute_not_exists(entryId)',
    },
  };
}

/** `items` with the entry's Put (in the audit table of `tables`) at the end, when there is one. */
export const withAudit = <T>(
  items: T[],
  entry: AuditEntry | undefined,
  tables: TableNames,
): (T | ReturnType<typeof auditPut>)[] => (entry ? [...items, auditPut(entry, tables)] : items);

function toAuditEntry(item: Item): AuditEntry {
  const actor: Actor = { kind: (item.actorKind?.S ?? 'system') as Actor['kind'] };
  if (item.actorSubject?.S !== undefined) actor.subject = item.actorSubject.S;
  if (item.actorEmail?.S !== undefined) actor.email = item.actorEmail.S;
  const entry: AuditEntry = {
    accountId: item.accountId?.S ?? '',
    entryId: item.entryId?.S ?? '',
    at: item.at?.S ?? '',
    actor,
    action: item.action?.S as AuditEntry['action'],
  };
  if (item.target?.S !== undefined) entry.target = item.target.S;
  if (item.ip?.S !== undefined) entry.ip = item.ip.S;
  if (item.userAgent?.S !== undefined) entry.userAgent = item.userAgent.S;
  if (item.details?.M)
    entry.details = Object.fromEntries(Object.entries(item.details.M).map(([k, v]) => [k, v.S ?? '']));
  return entry;
}

/** Above every entry id (ids begin with their year). */
const TOP = '\u{10FFFF}';

export class AuditLog extends StorePart {
  /** An entry on its own (a change whose write is not the store's). */
  async appendAudit(entry: AuditEntry): Promise<void> {
    await this.wire.call('PutItem', auditPut(entry, this.tables).Put);
  }

  /**
   * A page of the account's entries, newest first: a query of its partition read backwards, by entry
   * id between `since` and `until` (ids begin with their time), from after the cursor; the action and
   * actor filters are applied by DynamoDB on each page read, so pages are read until `limit` entries
   * (and one more, to know there are more) are found or the partition ends.
   */
  async listAudit(accountId: string, query: AuditQuery): Promise<AuditPage> {
    // After a cursor: up to it (BETWEEN is inclusive: the cursor's own entry is left out below).
    const until = query.until ?? TOP;
    const high = query.after !== undefined && query.after < until ? query.after : until;
    const low = query.since ?? '0';
    if (low > high) return { entries: [] };
    const values: Item = { ':accountId': S(accountId), ':low': S(low), ':high': S(high) };
    const filters: string[] = [];
    const names: Record<string, string> = {};
    if (query.actions) {
      names['#action'] = 'action';
      const keys = query.actions.map((action, i) => {
        values[`:action${i}`] = S(action);
        return `:action${i}`;
      });
      filters.push(keys.length > 0 ? `#action IN (${keys.join(', ')})` : 'attribute_not_exists(accountId)');
    }
    if (query.actorSubject !== undefined) {
      values[':actor'] = S(query.actorSubject);
      filters.push('actorSubject = :actor');
    }
    const found: AuditEntry[] = [];
    let start: Item | undefined;
    do {
      const page: QueryCommandOutput = await this.wire.call<QueryCommandOutput>('Query', {
        TableName: auditTableOf(this.tables),
        KeyConditionExpression: 'accountId = :accountId AND entryId BETWEEN :low AND :high',
        ...(filters.length > 0 ? { FilterExpression: filters.join(' AND ') } : {}),
        ...(Object.keys(names).length > 0 ? { ExpressionAttributeNames: names } : {}),
        ExpressionAttributeValues: values,
        ScanIndexForward: false,
        Limit: query.limit + 1,
        ...(start ? { ExclusiveStartKey: start } : {}),
      });
      for (const item of page.Items ?? [])
        if (item.entryId?.S !== query.after) found.push(toAuditEntry(item as Item));
      start = page.LastEvaluatedKey as Item | undefined;
    } while (start && found.length <= query.limit);
    const entries = found.slice(0, query.limit);
    const last = entries.at(-1);
    return found.length > query.limit && last ? { entries, next: last.entryId } : { entries };
  }
}
