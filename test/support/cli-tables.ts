import { beforeAll, inject } from 'vitest';
import { ensureTables, localClient } from '../../lib/local/dynamodb-local.js';
import { localTableNames } from '../../lib/local/stack.js';

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
  };
  beforeAll(async () => {
    const client = localClient(inject('dynamoEndpoint'));
    await ensureTables(client, tables);
    client.destroy();
  });
  return { tables, env };
}
