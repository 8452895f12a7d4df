/**
 * Accounts and keys in DynamoDB: the request path's one read of a key and its account, and the
 * operator's writes (accounts created with their initial credits, statuses, keys created and revoked).
 */
import {
  type BatchGetItemCommandOutput,
  type DynamoDBClient,
  GetItemCommand,
  type GetItemCommandOutput,
  paginateScan,
  QueryCommand,
  TransactionCanceledException,
  type TransactWriteItem,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import type { AccountStatus, Principal } from '../../core/access.js';
import {
  AccountExistsError,
  AccountNotFoundError,
  type AccountRecord,
  type KeyRecord,
  topUpEntryId,
} from '../../core/store.js';
import {
  type Item,
  keyItem,
  N,
  S,
  type TableNames,
  toAccount,
  toKey,
  toPrincipal,
  topUpItem,
} from './items.js';
import { INDEX } from './schema.js';
import { type Db, queryAll, sleep } from './store-db.js';
import type { DynamoWire } from './wire.js';

export class AccountsAndKeys {
  /** keyHash -> accountId. The mapping never changes, so it may live across requests (revocation, status and balance are read fresh every time). */
  private readonly accountOfKey = new Map<string, string>();
  private static readonly CACHE_LIMIT = 10_000;
  private readonly client: DynamoDBClient;
  private readonly tables: TableNames;
  private readonly wire: DynamoWire;

  constructor(db: Db) {
    this.client = db.client;
    this.tables = db.tables;
    this.wire = db.wire;
  }

  /**
   * The key and its account, read strongly consistently. Warm (mapping cached): one BatchGetItem.
   * Cold: the key item first (to learn its account), then the account.
   */
  async loadPrincipal(keyHash: string): Promise<Principal | undefined> {
    const cachedAccountId = this.accountOfKey.get(keyHash);
    if (cachedAccountId === undefined) return this.loadPrincipalCold(keyHash);
    const { keyItem: found, accountItem } = await this.batchRead(keyHash, cachedAccountId);
    if (!found) return undefined;
    return toPrincipal(found, accountItem);
  }

  private async loadPrincipalCold(keyHash: string): Promise<Principal | undefined> {
    // Through the wire, as the warm read: an unknown key (a guess, a typo) costs one cheap call.
    const key = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: this.tables.keys,
      Key: { keyHash: S(keyHash) },
      ConsistentRead: true,
    });
    if (!key.Item) return undefined;
    const accountId = key.Item.accountId?.S;
    if (!accountId) return undefined;
    const account = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: this.tables.accounts,
      Key: { accountId: S(accountId) },
      ConsistentRead: true,
    });
    this.remember(keyHash, accountId);
    return toPrincipal(key.Item, account.Item);
  }

  private remember(keyHash: string, accountId: string): void {
    if (this.accountOfKey.size >= AccountsAndKeys.CACHE_LIMIT) {
      const oldest = this.accountOfKey.keys().next().value;
      if (oldest !== undefined) this.accountOfKey.delete(oldest);
    }
    this.accountOfKey.set(keyHash, accountId);
  }

  private async batchRead(keyHash: string, accountId: string) {
    let request: Record<string, { Keys: Item[]; ConsistentRead: boolean }> = {
      [this.tables.keys]: { Keys: [{ keyHash: S(keyHash) }], ConsistentRead: true },
      [this.tables.accounts]: { Keys: [{ accountId: S(accountId) }], ConsistentRead: true },
    };
    let found: Item | undefined;
    let accountItem: Item | undefined;
    // UnprocessedKeys is rare (throttling); retry only what is left, a bounded number of times.
    for (let attempt = 0; attempt < 5; attempt++) {
      const out = await this.wire.call<BatchGetItemCommandOutput>('BatchGetItem', { RequestItems: request });
      found ??= out.Responses?.[this.tables.keys]?.[0];
      accountItem ??= out.Responses?.[this.tables.accounts]?.[0];
      const left = out.UnprocessedKeys;
      if (!left || Object.keys(left).length === 0) return { keyItem: found, accountItem };
      request = left as typeof request;
      await sleep(20 * 2 ** attempt);
    }
    throw new Error('BatchGetItem left keys unprocessed after 5 attempts');
  }

  async getAccount(accountId: string): Promise<AccountRecord | undefined> {
    const out = await this.client.send(
      new GetItemCommand({
        TableName: this.tables.accounts,
        Key: { accountId: S(accountId) },
        ConsistentRead: true,
      }),
    );
    return out.Item ? toAccount(out.Item) : undefined;
  }

  async countNegativeBalances(): Promise<number> {
    let count = 0;
    for await (const page of paginateScan(
      { client: this.client },
      {
        TableName: this.tables.accounts,
        FilterExpression: 'creditBalance < :zero',
        ExpressionAttributeValues: { ':zero': N(0) },
        Select: 'COUNT',
      },
    ))
      count += page.Count ?? 0;
    return count;
  }

  async listAccountIds(): Promise<string[]> {
    const ids: string[] = [];
    for await (const page of paginateScan(
      { client: this.client },
      { TableName: this.tables.accounts, ProjectionExpression: 'accountId' },
    )) {
      for (const item of page.Items ?? []) if (item.accountId?.S) ids.push(item.accountId.S);
    }
    return ids.sort();
  }

  async createAccount(accountId: string, initialCreditsNano: bigint, now: string): Promise<void> {
    const items: TransactWriteItem[] = [
      {
        Put: {
          TableName: this.tables.accounts,
          Item: {
            accountId: S(accountId),
            status: S('active'),
            creditBalance: N(initialCreditsNano),
            heldNano: N(0),
            createdAt: S(now),
          },
          ConditionExpression: 'attribute_not_exists(accountId)',
        },
      },
    ];
    if (initialCreditsNano > 0n) {
      const reference = 'initial-credits';
      items.push({
        Put: {
          TableName: this.tables.ledger,
          Item: topUpItem(accountId, topUpEntryId(reference), reference, initialCreditsNano, now),
          ConditionExpression: 'attribute_not_exists(entryId)',
        },
      });
    }
    try {
      await this.client.send(new TransactWriteItemsCommand({ TransactItems: items }));
    } catch (error) {
      if (
        error instanceof TransactionCanceledException &&
        error.CancellationReasons?.[0]?.Code === 'ConditionalCheckFailed'
      )
        throw new AccountExistsError(accountId);
      throw error;
    }
  }

  async setAccountStatus(accountId: string, status: AccountStatus, now: string): Promise<void> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.tables.accounts,
          Key: { accountId: S(accountId) },
          UpdateExpression: 'SET #status = :status, statusChangedAt = :now',
          ConditionExpression: 'attribute_exists(accountId)',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: { ':status': S(status), ':now': S(now) },
        }),
      );
    } catch (error) {
      if ((error as Error).name === 'ConditionalCheckFailedException')
        throw new AccountNotFoundError(accountId);
      throw error;
    }
  }

  async createKey(key: KeyRecord): Promise<void> {
    try {
      await this.client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            {
              ConditionCheck: {
                TableName: this.tables.accounts,
                Key: { accountId: S(key.accountId) },
                ConditionExpression: 'attribute_exists(accountId)',
              },
            },
            {
              Put: {
                TableName: this.tables.keys,
                Item: keyItem(key),
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
      )
        throw new AccountNotFoundError(key.accountId);
      throw error;
    }
  }

  async findKeyById(keyId: string): Promise<KeyRecord | undefined> {
    const found = await this.client.send(
      new QueryCommand({
        TableName: this.tables.keys,
        IndexName: INDEX.keysByKeyId,
        KeyConditionExpression: 'keyId = :keyId',
        ExpressionAttributeValues: { ':keyId': S(keyId) },
      }),
    );
    const item = found.Items?.[0];
    return item ? toKey(item) : undefined;
  }

  async revokeKey(keyHash: string, now: string): Promise<KeyRecord> {
    const out = await this.client.send(
      new UpdateItemCommand({
        TableName: this.tables.keys,
        Key: { keyHash: S(keyHash) },
        UpdateExpression: 'SET #status = :revoked, revokedAt = if_not_exists(revokedAt, :now)',
        ConditionExpression: 'attribute_exists(keyHash)',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':revoked': S('revoked'), ':now': S(now) },
        ReturnValues: 'ALL_NEW',
      }),
    );
    return toKey(out.Attributes ?? {});
  }

  async listKeys(accountId: string): Promise<KeyRecord[]> {
    const items = await queryAll(this.client, {
      TableName: this.tables.keys,
      IndexName: INDEX.keysByAccount,
      KeyConditionExpression: 'accountId = :accountId',
      ExpressionAttributeValues: { ':accountId': S(accountId) },
    });
    return items.map(toKey);
  }
}
