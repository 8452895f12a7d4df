import { beforeAll, inject } from 'vitest';
import { ensureTables, localClient } from '../../lib/local/dynamodb-local.js';
import { localTableNames } from '../../lib/local/stack.js';
import {
  LOCAL_AUDIT_TABLE_NAME,
  LOCAL_DASHBOARD_TABLE_NAME,
  LOCAL_TEAM_TABLE_NAME,
} from '../../lib/tables.js';

/**
 * Tables of a test file's own in DynamoDB Local, named with `prefix` and made before its tests run,
 * and the environment that points the operator CLI (bin/admin.ts) at them.
 */
export function cliTables(prefix: string) {
  const tables = localTableNames(prefix);
  const env = {
    ...process.env,
    DYNAMODB_ENDPOINT: inject('dynamoEndpoint'),
    KEYS_TABLE: tables.keys,
    ACCOUNTS_TABLE: tables.accounts,
    LEDGER_TABLE: tables.ledger,
    HOLDS_TABLE: tables.holds,
    // The dashboard's (its users' e-mail addresses), made by the CLI itself when it is missing.
    DASHBOARD_TABLE: `${prefix}${LOCAL_DASHBOARD_TABLE_NAME}`,
    // The team's and the audit log (the operator's changes are written with their entries), as well.
    TEAM_TABLE: `${prefix}${LOCAL_TEAM_TABLE_NAME}`,
    AUDIT_TABLE: `${prefix}${LOCAL_AUDIT_TABLE_NAME}`,
  };
  beforeAll(async () => {
    const client = localClient(inject('dynamoEndpoint'));
    await ensureTables(client, tables);
    client.destroy();
  });
  return { tables, env };
}
