/**
 * The table schema, written once: the DynamoDB adapter's own, used by the CDK stack and the local
 * stack through lib/tables.ts. Pure data, no runtime dependency.
 *
 * keys:     keyHash (S, SHA-256 hex of the full key)          GSI byAccount (accountId, createdAt), GSI byKeyId (keyId)
 * accounts: accountId (S)                                      creditBalance, heldNano (N, integer nano-USD), status
 * ledger:   accountId (S) + entryId (S: generation id or `topup#<reference>`)
 * holds:    accountId (S) + holdId (S: generation id)          amountNano, expiresAt (N); live holds only
 * An account split into slices has, for slice i > 0, `<accountId>#<i>` in place of its id in all three
 * (items.ts): one partition per slice.
 * dashboard: id (S)                                            `session#<SHA-256 of the session id>` (accountId,
 *           subject, createdAt, expiresAt: N epoch seconds, the table's TTL attribute) and
 *           `user#<OpenID subject>` (accountId, createdAt) and `billing-customer#<accountId>` (customer:
 *           the account's Stripe Customer id, rememberedAt): the dashboard function's own (dashboard.ts);
 *           `watch#<accountId>`, `outbox#<accountId>#<kind>-<seq>` and `profile#<OpenID subject>`: the
 *           balance watch's (watch.ts), the first two in GSI watchList (watchList, id), sparse.
 * team:     accountId (S) + sk (S)                              the people of an account (team.ts, invitations.ts):
 *           `member#<OpenID subject>` (subject, memberSubject = subject, email, role, joinedAt, invitedBy),
 *           in GSI byMember (memberSubject, joinedAt), sparse: only member items carry memberSubject;
 *           `invite#<invitationId>` (tokenHash: SHA-256 of the link's token, never the token; email,
 *           role, invitedBy, createdAt, expiresAt: N epoch seconds, the table's TTL attribute);
 *           `owners` (count: N), the account's number of owners, kept by every write that makes, demotes
 *           or removes an owner, in its transaction, and a condition of those that take one away
 *           (never below 1). No item of the team table holds a secret.
 * audit:    accountId (S) + entryId (S: ISO time, `#`, 8 random hex) the append-only audit log (audit.ts):
 *           at, action, actorKind, actorSubject, actorEmail, target, details (M of S), ip, userAgent,
 *           expiresAt (N epoch seconds, at + AUDIT_RETENTION_DAYS: 400 days, the table's TTL attribute).
 *           Each entry is a Put in the transaction of the change it records; nothing updates or deletes
 *           one (TTL aside). Newest first is the partition read backwards.
 * The team and audit tables are found as the dashboard's is, by their environment variable at first
 * use (TEAM_TABLE, AUDIT_TABLE): only the functions that write them are told of them.
 */
export interface TableDefinition {
  /** Logical name, also the suffix of the local table name. */
  readonly id: 'keys' | 'accounts' | 'ledger' | 'holds' | 'dashboard' | 'team' | 'audit';
  readonly partitionKey: string;
  readonly sortKey?: string;
  readonly indexes: readonly { name: string; partitionKey: string; sortKey?: string }[];
  /** The attribute DynamoDB's Time to Live deletes an item by (epoch seconds); absent: no TTL. */
  readonly timeToLiveAttribute?: string;
  /** Its stream's view, when it has one (the accounts table's: the balance watch reads it). */
  readonly stream?: 'NEW_AND_OLD_IMAGES';
}

/** Index names, used by the table definitions below and by the queries that read them. */
export const INDEX = {
  keysByAccount: 'byAccount',
  keysByKeyId: 'byKeyId',
  /**
   * The dashboard table's sparse index of the balance watch's items (watch.ts): only `watch#` and
   * `outbox#` items carry `watchList` (`watch`, `outbox`, or `dead-letter` for an e-mail given up on),
   * so listing them reads those alone.
   */
  watchList: 'watchList',
  /** The team table's sparse index of member items by the member's subject (membershipsOf). */
  membersBySubject: 'byMember',
} as const;

export const TABLES = {
  keys: {
    id: 'keys',
    partitionKey: 'keyHash',
    indexes: [
      { name: INDEX.keysByAccount, partitionKey: 'accountId', sortKey: 'createdAt' },
      { name: INDEX.keysByKeyId, partitionKey: 'keyId' },
    ],
  },
  accounts: { id: 'accounts', partitionKey: 'accountId', indexes: [], stream: 'NEW_AND_OLD_IMAGES' },
  ledger: { id: 'ledger', partitionKey: 'accountId', sortKey: 'entryId', indexes: [] },
  holds: { id: 'holds', partitionKey: 'accountId', sortKey: 'holdId', indexes: [] },
} as const satisfies Record<string, TableDefinition>;

/**
 * The dashboard's table (sessions and the OpenID subject -> account links), apart from TABLES: only the
 * dashboard function uses it, and it names it in DASHBOARD_TABLE (read at its first use, so the other
 * functions need not be told of it).
 */
export const DASHBOARD_TABLE = {
  id: 'dashboard',
  partitionKey: 'id',
  indexes: [{ name: INDEX.watchList, partitionKey: 'watchList', sortKey: 'id' }],
  timeToLiveAttribute: 'expiresAt',
} as const satisfies TableDefinition;
export const DASHBOARD_TABLE_ENV = 'DASHBOARD_TABLE';
export const LOCAL_DASHBOARD_TABLE_NAME = 'svc-dashboard';

/** The people of an account (members, invitations, its count of owners): the dashboard's to write. */
export const TEAM_TABLE = {
  id: 'team',
  partitionKey: 'accountId',
  sortKey: 'sk',
  indexes: [{ name: INDEX.membersBySubject, partitionKey: 'memberSubject', sortKey: 'joinedAt' }],
  timeToLiveAttribute: 'expiresAt',
} as const satisfies TableDefinition;
export const TEAM_TABLE_ENV = 'TEAM_TABLE';
export const LOCAL_TEAM_TABLE_NAME = 'svc-team';

/** The audit log: written by the dashboard, the payments webhook, the reconciler and the operator. */
export const AUDIT_TABLE = {
  id: 'audit',
  partitionKey: 'accountId',
  sortKey: 'entryId',
  indexes: [],
  timeToLiveAttribute: 'expiresAt',
} as const satisfies TableDefinition;
export const AUDIT_TABLE_ENV = 'AUDIT_TABLE';
export const LOCAL_AUDIT_TABLE_NAME = 'svc-audit';

/** Environment variables through which a function learns its table names. */
export const TABLE_ENV = {
  keys: 'KEYS_TABLE',
  accounts: 'ACCOUNTS_TABLE',
  ledger: 'LEDGER_TABLE',
  holds: 'HOLDS_TABLE',
} as const;

/** Table names the local stack uses when no environment variable names them. */
export const LOCAL_TABLE_NAMES = {
  keys: 'svc-keys',
  accounts: 'svc-accounts',
  ledger: 'svc-ledger',
  holds: 'svc-holds',
} as const;

/** Every attribute used in a key schema is a string. */
export function keyAttributes(def: TableDefinition): string[] {
  const names = new Set<string>([def.partitionKey]);
  if (def.sortKey) names.add(def.sortKey);
  for (const index of def.indexes) {
    names.add(index.partitionKey);
    if (index.sortKey) names.add(index.sortKey);
  }
  return [...names];
}
