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
 */
export interface TableDefinition {
  /** Logical name, also the suffix of the local table name. */
  readonly id: 'keys' | 'accounts' | 'ledger' | 'holds';
  readonly partitionKey: string;
  readonly sortKey?: string;
  readonly indexes: readonly { name: string; partitionKey: string; sortKey?: string }[];
}

/** Index names, used by the table definitions below and by the queries that read them. */
export const INDEX = { keysByAccount: 'byAccount', keysByKeyId: 'byKeyId' } as const;

export const TABLES = {
  keys: {
    id: 'keys',
    partitionKey: 'keyHash',
    indexes: [
      { name: INDEX.keysByAccount, partitionKey: 'accountId', sortKey: 'createdAt' },
      { name: INDEX.keysByKeyId, partitionKey: 'keyId' },
    ],
  },
  accounts: { id: 'accounts', partitionKey: 'accountId', indexes: [] },
  ledger: { id: 'ledger', partitionKey: 'accountId', sortKey: 'entryId', indexes: [] },
  holds: { id: 'holds', partitionKey: 'accountId', sortKey: 'holdId', indexes: [] },
} as const satisfies Record<string, TableDefinition>;

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
