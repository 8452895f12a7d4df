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
 *           `user#<OpenID subject>` (accountId, createdAt): the dashboard function's own (dashboard.ts);
 *           `watch#<accountId>`, `outbox#<accountId>#<kind>-<seq>` and `profile#<OpenID subject>`: the
 *           balance watch's (watch.ts), the first two in GSI watchList (watchList, id), sparse.
 */
export interface TableDefinition {
  /** Logical name, also the suffix of the local table name. */
  readonly id: 'keys' | 'accounts' | 'ledger' | 'holds' | 'dashboard';
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
