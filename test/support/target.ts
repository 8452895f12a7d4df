import { randomBytes } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { inject } from 'vitest';
import { DynamoStore, type TableNames, tableNamesFromEnv } from '../../functions/adapters/dynamodb/index.js';
import { TRANSFER_DELAY_MS } from '../../functions/core/store.js';
import { keyDailyCapsOn } from '../../functions/shared/env.js';
import { moveDueTransfers } from '../../functions/sweeper/sweep.js';
import { type AdminContext, createAccount, createKey, getAccount } from '../../lib/admin/operations.js';
import type { Principal } from '../../lib/local/iam-policies.js';
import { type LocalStack, type LocalStackOptions, startLocalStack } from '../../lib/local/stack.js';
import { settled } from './settled.js';

/**
 * What a contract or integration test runs against: by default a local stack it starts itself
 * (emulator + DynamoDB Local + simulator); with SVC_BASE_URL, a deployed stack, administered
 * through its tables (KEYS_TABLE, ACCOUNTS_TABLE, LEDGER_TABLE and AWS credentials from the environment).
 */
export interface Target {
  baseUrl: string;
  admin: AdminContext;
  /** The raw client and tables, for tests that look at items directly. */
  client: DynamoDBClient;
  tables: TableNames;
  /** Present only for the local stack. */
  local: LocalStack | undefined;
  stop(): Promise<void>;
}

export interface TargetOptions extends LocalStackOptions {
  /**
   * Whose credentials the admin functions use on a local stack (default the operator's). The contract
   * suite passes `ciSuite`: against the sandbox it runs under the CI role, whose policy the local IAM
   * layer then holds its calls to.
   */
  adminAs?: Principal;
}

export async function startTarget({ adminAs, ...options }: TargetOptions = {}): Promise<Target> {
  if (process.env.SVC_BASE_URL) {
    const client = new DynamoDBClient({});
    const tables = tableNamesFromEnv();
    return {
      baseUrl: process.env.SVC_BASE_URL.replace(/\/+$/, ''),
      admin: { store: new DynamoStore(client, tables), keyDailyCaps: keyDailyCapsOn() },
      client,
      tables,
      local: undefined,
      stop: async () => client.destroy(),
    };
  }
  const local = await startLocalStack({
    dynamoEndpoint: inject('dynamoEndpoint'),
    tablePrefix: `t${randomBytes(4).toString('hex')}-`,
    // The accounts table's stream is polled four times a second per stack: only a test that asks for
    // it reads it (balance-watch-stream.test.ts), so the suite's many stacks do not load the shared
    // DynamoDB Local with reads no test looks at. `npm start` delivers it, as deployed.
    watchStream: false,
    ...options,
  });
  return {
    baseUrl: local.baseUrl,
    // The operator's per-key daily caps setting as the stack's (options.env is in process.env by now).
    admin: { store: adminAs ? local.storeAs(adminAs) : local.store, keyDailyCaps: keyDailyCapsOn() },
    client: local.client,
    tables: local.tables,
    local,
    stop: async () => {
      // A call refused for want of a grant fails the file that made it, even where the code under test
      // swallows the error (as AWS would have refused it, whether or not anyone noticed).
      const denials = local.iam.takeDenials();
      await local.stop();
      if (denials.length > 0)
        throw new Error(
          `the IAM layer refused ${denials.length} call(s) the stack's policies do not allow:\n${[
            ...new Set(denials.map((d) => d.message)),
          ].join('\n')}`,
        );
    },
  };
}

let counter = 0;
/** A fresh account with credits and a key; unique per call so suites never share balances. */
export async function newAccount(
  target: Target,
  credits = '5',
): Promise<{ accountId: string; key: string; keyId: string }> {
  counter += 1;
  const accountId = `test-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}-${counter}`;
  await createAccount(target.admin, accountId, credits === '0' ? undefined : credits);
  const { key, keyId } = await createKey(target.admin, accountId, 'test');
  return { accountId, key, keyId };
}

/** The account's balance in nano-USD once every request sent so far is settled, read strongly consistently. */
export async function balanceNano(target: Target, accountId: string): Promise<bigint> {
  // A reply reaches the client before its settlement is written: read once the target is done.
  await settled(target);
  const account = await getAccount(target.admin, accountId);
  if (!account) throw new Error(`no account ${accountId}`);
  return account.balanceNano;
}

/**
 * Moves every scheduled transfer between slices now, as the sweeper does once they are due (a split's
 * rebalance and a top-up's spread wait TRANSFER_DELAY_MS, six minutes, on AWS), acting as the
 * sweeper. Returns how many moved. Local stacks only.
 */
export async function landTransfers(target: Target): Promise<number> {
  if (!target.local) throw new Error('transfers are landed early on a local stack only');
  return moveDueTransfers(target.local.storeAs('sweeper'), Date.now() + TRANSFER_DELAY_MS);
}

/** A GET with a customer's key, and its status and JSON body. */
export async function getWithKey(target: Target, path: string, key: string) {
  const response = await fetch(`${target.baseUrl}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}
