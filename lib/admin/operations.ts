import {
  type AttributeValue,
  type DynamoDBClient,
  GetItemCommand,
  paginateQuery,
  paginateScan,
  QueryCommand,
  type QueryCommandInput,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import type { TableNames } from '../../functions/adapters/dynamodb.js';
import type { AccountStatus } from '../../functions/core/access.js';
import { generateApiKey } from '../../functions/core/auth.js';
import { nanoToUsd, usdToNano } from '../../functions/core/money.js';

/**
 * The operator's operations on accounts, credits and keys. Every balance change is a transaction
 * that also writes its ledger entry, so `creditBalance` always equals top-ups minus charges.
 */

export class AdminError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AdminError';
  }
}

export interface AdminContext {
  client: DynamoDBClient;
  tables: TableNames;
}

export interface AccountView {
  accountId: string;
  status: AccountStatus;
  /** USD. */
  creditBalance: number;
}

export interface KeyView {
  keyId: string;
  name: string;
  displayPrefix: string;
  status: string;
  createdAt: string;
  revokedAt?: string;
}

const S = (value: string): AttributeValue => ({ S: value });
const N = (value: bigint): AttributeValue => ({ N: value.toString() });
const ACCOUNT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export function checkAccountId(accountId: string): string {
  if (!ACCOUNT_ID.test(accountId))
    throw new AdminError(
      `invalid account id ${JSON.stringify(accountId)}: use 1-64 letters, digits, ".", "_" or "-"`,
    );
  return accountId;
}

/** A positive USD amount with at most 9 decimals, as nano-USD. */
export function parseCredits(usd: string): bigint {
  if (!/^\d+(\.\d{1,9})?$/.test(usd))
    throw new AdminError(`invalid amount ${JSON.stringify(usd)}: a positive USD amount like 5 or 12.50`);
  const nano = usdToNano(usd);
  if (nano <= 0n) throw new AdminError('the amount must be greater than 0');
  return nano;
}

function topUpEntry(accountId: string, reference: string, amountNano: bigint, now: string) {
  return {
    Put: {
      TableName: '',
      Item: {
        accountId: S(accountId),
        entryId: S(`topup#${reference}`),
        type: S('topup'),
        reference: S(reference),
        amountNanoUsd: N(amountNano),
        createdAt: S(now),
      },
      ConditionExpression: 'attribute_not_exists(entryId)',
    },
  };
}

export async function createAccount(
  ctx: AdminContext,
  accountId: string,
  creditsUsd?: string,
): Promise<AccountView> {
  checkAccountId(accountId);
  const credits = creditsUsd === undefined ? 0n : parseCredits(creditsUsd);
  const now = new Date().toISOString();
  const items: NonNullable<ConstructorParameters<typeof TransactWriteItemsCommand>[0]['TransactItems']> = [
    {
      Put: {
        TableName: ctx.tables.accounts,
        Item: { accountId: S(accountId), status: S('active'), creditBalance: N(credits), createdAt: S(now) },
        ConditionExpression: 'attribute_not_exists(accountId)',
      },
    },
  ];
  if (credits > 0n) {
    const entry = topUpEntry(accountId, 'initial-credits', credits, now);
    items.push({ Put: { ...entry.Put, TableName: ctx.tables.ledger } });
  }
  try {
    await ctx.client.send(new TransactWriteItemsCommand({ TransactItems: items }));
  } catch (error) {
    if (
      error instanceof TransactionCanceledException &&
      error.CancellationReasons?.[0]?.Code === 'ConditionalCheckFailed'
    ) {
      throw new AdminError(`account ${accountId} already exists`);
    }
    throw error;
  }
  return { accountId, status: 'active', creditBalance: Number(nanoToUsd(credits)) };
}

export async function getAccount(
  ctx: AdminContext,
  accountId: string,
): Promise<{ accountId: string; status: AccountStatus; balanceNano: bigint } | undefined> {
  const out = await ctx.client.send(
    new GetItemCommand({
      TableName: ctx.tables.accounts,
      Key: { accountId: S(accountId) },
      ConsistentRead: true,
    }),
  );
  if (!out.Item) return undefined;
  return {
    accountId,
    status: (out.Item.status?.S ?? 'active') as AccountStatus,
    balanceNano: BigInt(out.Item.creditBalance?.N ?? '0'),
  };
}

export async function showAccount(ctx: AdminContext, accountId: string): Promise<AccountView> {
  const account = await getAccount(ctx, accountId);
  if (!account) throw new AdminError(`no such account: ${accountId}`);
  return { accountId, status: account.status, creditBalance: Number(nanoToUsd(account.balanceNano)) };
}

export async function setAccountStatus(
  ctx: AdminContext,
  accountId: string,
  status: AccountStatus,
): Promise<AccountView> {
  try {
    await ctx.client.send(
      new UpdateItemCommand({
        TableName: ctx.tables.accounts,
        Key: { accountId: S(accountId) },
        UpdateExpression: 'SET #status = :status, statusChangedAt = :now',
        ConditionExpression: 'attribute_exists(accountId)',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':status': S(status), ':now': S(new Date().toISOString()) },
      }),
    );
  } catch (error) {
    if ((error as Error).name === 'ConditionalCheckFailedException')
      throw new AdminError(`no such account: ${accountId}`);
    throw error;
  }
  return showAccount(ctx, accountId);
}

/** Adds credits once per payment reference: the same reference twice adds once. */
export async function addCredits(
  ctx: AdminContext,
  accountId: string,
  usd: string,
  reference: string,
): Promise<{ applied: boolean; account: AccountView }> {
  const amount = parseCredits(usd);
  if (!/^[\x21-\x7e]{1,128}$/.test(reference))
    throw new AdminError('the reference must be 1-128 printable characters without spaces');
  const entry = topUpEntry(accountId, reference, amount, new Date().toISOString());
  let applied = true;
  try {
    await ctx.client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          { Put: { ...entry.Put, TableName: ctx.tables.ledger } },
          {
            Update: {
              TableName: ctx.tables.accounts,
              Key: { accountId: S(accountId) },
              UpdateExpression: 'ADD creditBalance :amount',
              ConditionExpression: 'attribute_exists(accountId)',
              ExpressionAttributeValues: { ':amount': N(amount) },
            },
          },
        ],
      }),
    );
  } catch (error) {
    if (!(error instanceof TransactionCanceledException)) throw error;
    const [ledger, account] = error.CancellationReasons ?? [];
    if (account?.Code === 'ConditionalCheckFailed') throw new AdminError(`no such account: ${accountId}`);
    if (ledger?.Code !== 'ConditionalCheckFailed') throw error;
    applied = false;
  }
  return { applied, account: await showAccount(ctx, accountId) };
}

export async function createKey(
  ctx: AdminContext,
  accountId: string,
  name: string,
): Promise<{ key: string; keyId: string; name: string; accountId: string }> {
  if (name.trim() === '' || name.length > 128) throw new AdminError('the key name must be 1-128 characters');
  const generated = generateApiKey();
  try {
    await ctx.client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          {
            ConditionCheck: {
              TableName: ctx.tables.accounts,
              Key: { accountId: S(accountId) },
              ConditionExpression: 'attribute_exists(accountId)',
            },
          },
          {
            Put: {
              TableName: ctx.tables.keys,
              Item: {
                keyHash: S(generated.keyHash),
                keyId: S(generated.keyId),
                accountId: S(accountId),
                name: S(name),
                displayPrefix: S(generated.displayPrefix),
                status: S('active'),
                createdAt: S(new Date().toISOString()),
              },
              ConditionExpression: 'attribute_not_exists(keyHash)',
            },
          },
        ],
      }),
    );
  } catch (error) {
    if (
      error instanceof TransactionCanceledException &&
      error.CancellationReasons?.[0]?.Code === 'ConditionalCheckFailed'
    ) {
      throw new AdminError(`no such account: ${accountId}`);
    }
    throw error;
  }
  return { key: generated.key, keyId: generated.keyId, name, accountId };
}

export async function revokeKey(ctx: AdminContext, keyId: string): Promise<KeyView> {
  const found = await ctx.client.send(
    new QueryCommand({
      TableName: ctx.tables.keys,
      IndexName: 'byKeyId',
      KeyConditionExpression: 'keyId = :keyId',
      ExpressionAttributeValues: { ':keyId': S(keyId) },
    }),
  );
  const item = found.Items?.[0];
  const keyHash = item?.keyHash?.S;
  if (!item || !keyHash) throw new AdminError(`no such key: ${keyId}`);
  const out = await ctx.client.send(
    new UpdateItemCommand({
      TableName: ctx.tables.keys,
      Key: { keyHash: S(keyHash) },
      UpdateExpression: 'SET #status = :revoked, revokedAt = if_not_exists(revokedAt, :now)',
      ExpressionAttributeNames: { '#status': 'status' },
      ExpressionAttributeValues: { ':revoked': S('revoked'), ':now': S(new Date().toISOString()) },
      ReturnValues: 'ALL_NEW',
    }),
  );
  return toKeyView(out.Attributes ?? item);
}

export async function listKeys(ctx: AdminContext, accountId: string): Promise<KeyView[]> {
  if (!(await getAccount(ctx, accountId))) throw new AdminError(`no such account: ${accountId}`);
  const items = await queryAll(ctx, {
    TableName: ctx.tables.keys,
    IndexName: 'byAccount',
    KeyConditionExpression: 'accountId = :accountId',
    ExpressionAttributeValues: { ':accountId': S(accountId) },
  });
  return items.map(toKeyView);
}

/** Every item a query matches, through the SDK's own paginator. */
async function queryAll(
  ctx: AdminContext,
  input: QueryCommandInput,
): Promise<Record<string, AttributeValue>[]> {
  const items: Record<string, AttributeValue>[] = [];
  for await (const page of paginateQuery({ client: ctx.client }, input)) items.push(...(page.Items ?? []));
  return items;
}

function toKeyView(item: Record<string, AttributeValue>): KeyView {
  return {
    keyId: item.keyId?.S ?? '',
    name: item.name?.S ?? '',
    displayPrefix: item.displayPrefix?.S ?? '',
    status: item.status?.S ?? '',
    createdAt: item.createdAt?.S ?? '',
    ...(item.revokedAt?.S ? { revokedAt: item.revokedAt.S } : {}),
  };
}

export interface LedgerEntry {
  entryId: string;
  type: 'charge' | 'topup';
  createdAt: string;
  /** Signed change to the balance in nano-USD: a top-up is positive, a charge negative. */
  deltaNano: bigint;
  tier?: string;
  keyId?: string;
  promptTokens?: number;
  completionTokens?: number;
  cachedTokens?: number;
  estimated?: boolean;
  reference?: string;
}

/** Every ledger entry of an account, oldest first within each type (generation ids sort by time). */
export async function listLedger(ctx: AdminContext, accountId: string): Promise<LedgerEntry[]> {
  const items = await queryAll(ctx, {
    TableName: ctx.tables.ledger,
    KeyConditionExpression: 'accountId = :accountId',
    ExpressionAttributeValues: { ':accountId': S(accountId) },
    ConsistentRead: true,
  });
  const entries = items.map(toLedgerEntry);
  return entries.sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.entryId.localeCompare(b.entryId));
}

function toLedgerEntry(item: Record<string, AttributeValue>): LedgerEntry {
  const num = (name: string) => (item[name]?.N === undefined ? undefined : Number(item[name]?.N));
  if (item.type?.S === 'topup') {
    return {
      entryId: item.entryId?.S ?? '',
      type: 'topup',
      createdAt: item.createdAt?.S ?? '',
      deltaNano: BigInt(item.amountNanoUsd?.N ?? '0'),
      ...(item.reference?.S ? { reference: item.reference.S } : {}),
    };
  }
  const entry: LedgerEntry = {
    entryId: item.entryId?.S ?? '',
    type: 'charge',
    createdAt: item.createdAt?.S ?? '',
    deltaNano: -BigInt(item.billedNanoUsd?.N ?? '0'),
    estimated: item.estimated?.BOOL ?? false,
  };
  if (item.tier?.S) entry.tier = item.tier.S;
  if (item.keyId?.S) entry.keyId = item.keyId.S;
  const prompt = num('promptTokens');
  const completion = num('completionTokens');
  const cached = num('cachedTokens');
  if (prompt !== undefined) entry.promptTokens = prompt;
  if (completion !== undefined) entry.completionTokens = completion;
  if (cached !== undefined) entry.cachedTokens = cached;
  return entry;
}

export interface Reconciliation {
  accountId: string;
  /** creditBalance in nano-USD. */
  balanceNano: bigint;
  /** Top-ups minus charges in nano-USD. */
  ledgerNano: bigint;
  differenceNano: bigint;
  entries: number;
}

/** Checks that each account's creditBalance equals its top-ups minus its charges. */
export async function reconcile(ctx: AdminContext, accountId?: string): Promise<Reconciliation[]> {
  const accountIds = accountId ? [accountId] : await allAccountIds(ctx);
  const results: Reconciliation[] = [];
  for (const id of accountIds) {
    const account = await getAccount(ctx, id);
    if (!account) throw new AdminError(`no such account: ${id}`);
    const entries = await listLedger(ctx, id);
    const ledgerNano = entries.reduce((sum, entry) => sum + entry.deltaNano, 0n);
    results.push({
      accountId: id,
      balanceNano: account.balanceNano,
      ledgerNano,
      differenceNano: account.balanceNano - ledgerNano,
      entries: entries.length,
    });
  }
  return results;
}

async function allAccountIds(ctx: AdminContext): Promise<string[]> {
  const ids: string[] = [];
  for await (const page of paginateScan(
    { client: ctx.client },
    { TableName: ctx.tables.accounts, ProjectionExpression: 'accountId' },
  )) {
    for (const item of page.Items ?? []) if (item.accountId?.S) ids.push(item.accountId.S);
  }
  return ids.sort();
}
