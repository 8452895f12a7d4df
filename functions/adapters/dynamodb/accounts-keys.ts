/**
 * Accounts and keys in DynamoDB: the request path's one read of a key and its account, and the
 * operator's writes (accounts created with their initial credits, statuses, keys created and revoked).
 */
import type {
  BatchGetItemCommandOutput,
  GetItemCommandOutput,
  QueryCommandOutput,
  ScanCommandOutput,
  TransactWriteItem,
  UpdateItemCommandOutput,
} from '@aws-sdk/client-dynamodb';
import type { AccountStatus, Principal } from '../../core/access.js';
import {
  AccountExistsError,
  AccountNotFoundError,
  type AccountRecord,
  KeyNotFoundError,
  type KeyRecord,
  TooManyKeysError,
  topUpEntryId,
} from '../../core/store.js';
import {
  accountOfItem,
  type Item,
  keyItem,
  N,
  S,
  sliceKey,
  slicesOf,
  toKey,
  toPrincipal,
  topUpItem,
} from './items.js';
import { INDEX } from './schema.js';
import { SliceCredit } from './slice-credit.js';
import { Slices } from './slices.js';
import {
  cancellationReasons,
  type Db,
  isRetryableSettlementError,
  pages,
  queryAll,
  retried,
  StorePart,
  sleep,
} from './store-db.js';

export class AccountsAndKeys extends StorePart {
  /**
   * keyHash -> its account and how many slices the account had when last read. The mapping never
   * changes and an account's slice count only grows (a stale count draws from fewer slices, all of
   * which exist), so both may live across requests; revocation, status and balance are read fresh.
   */
  private readonly accountOfKey = new Map<string, { accountId: string; slices: number }>();
  private static readonly CACHE_LIMIT = 10_000;
  readonly slices: Slices;
  private readonly sliceCredit: SliceCredit;

  constructor(db: Db) {
    super(db);
    this.slices = new Slices(db);
    this.sliceCredit = new SliceCredit(this.slices);
  }

  /**
   * The key and one slice of its account, read strongly consistently. Warm (mapping cached): one
   * BatchGetItem of the key and a slice drawn at random. Cold: the key item first (to learn its
   * account), then the account item (slice 0, which says how many slices there are), then the drawn
   * slice if it is another. A drawn slice with no available credit, of an account that has others,
   * is not the account's answer: the request moves to a slice that has some (slice-credit.ts), read
   * strongly before it is admitted.
   */
  async loadPrincipal(keyHash: string): Promise<Principal | undefined> {
    const cached = this.accountOfKey.get(keyHash);
    if (cached === undefined) return this.loadPrincipalCold(keyHash);
    const slice = Math.floor(Math.random() * cached.slices);
    const { keyItem: found, accountItem } = await this.batchRead(keyHash, sliceKey(cached.accountId, slice));
    if (!found) return undefined;
    if (slice === 0 && accountItem) cached.slices = slicesOf(accountItem);
    return this.elsewhereIfDry(toPrincipal(found, accountItem, slice, cached.slices), found, cached.slices);
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
    const account = await this.slices.head(accountId);
    const slices = slicesOf(account);
    this.remember(keyHash, accountId, slices);
    // A slice drawn at random, as a warm read draws it: the instances a busy account starts at once
    // would otherwise all admit their first request on the account item and meet there.
    const slice = Math.floor(Math.random() * slices);
    const item = slice === 0 || !account ? account : await this.slices.readOne(accountId, slice);
    // A drawn slice whose read DynamoDB throttled: the account item, read already, stands in for it.
    const [drawn, on] = item ? [item, slice] : [account, 0];
    return this.elsewhereIfDry(toPrincipal(key.Item, drawn, on, slices), key.Item, slices);
  }

  /**
   * The principal on a slice with credit when the one it drew is dry, as slice-credit.ts chooses.
   * When none is found, the request is refused for credit if it spends (402), and a 402 states the
   * account's balance, not the slice's: the balance over all slices is read then, one strongly
   * consistent BatchGetItem, on that path only (a key or account refused for its status is not).
   */
  private async elsewhereIfDry(
    principal: Principal | undefined,
    keyItem: Item,
    slices: number,
  ): Promise<Principal | undefined> {
    if (!principal || slices === 1 || principal.balanceNano - principal.heldNano > 0n) return principal;
    const moved = await this.sliceCredit.elsewhere(principal.accountId, slices, principal.slice ?? 0);
    if (moved) return toPrincipal(keyItem, moved.item, moved.slice, slices);
    if (principal.keyStatus !== 'active' || principal.accountStatus !== 'active') return principal;
    const accountBalanceNano = await this.slices.balance(principal.accountId, slices);
    return accountBalanceNano === undefined ? principal : { ...principal, accountBalanceNano };
  }

  private remember(keyHash: string, accountId: string, slices: number): void {
    if (this.accountOfKey.size >= AccountsAndKeys.CACHE_LIMIT) {
      const oldest = this.accountOfKey.keys().next().value;
      if (oldest !== undefined) this.accountOfKey.delete(oldest);
    }
    this.accountOfKey.set(keyHash, { accountId, slices });
  }

  private async batchRead(keyHash: string, accountKey: string) {
    let request: Record<string, { Keys: Item[]; ConsistentRead: boolean }> = {
      [this.tables.keys]: { Keys: [{ keyHash: S(keyHash) }], ConsistentRead: true },
      [this.tables.accounts]: { Keys: [{ accountId: S(accountKey) }], ConsistentRead: true },
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

  /** The account, its balance and held amounts summed over its slices as of one instant (slices.ts). */
  getAccount(accountId: string, options: { deadline?: number } = {}): Promise<AccountRecord | undefined> {
    return this.slices.account(accountId, options);
  }

  /** Accounts whose balance, summed over their slices, is below zero (a scan). */
  async countNegativeBalances(): Promise<number> {
    const balances = new Map<string, bigint>();
    for await (const page of pages<ScanCommandOutput>(this.wire, 'Scan', {
      TableName: this.tables.accounts,
      ProjectionExpression: 'accountId, creditBalance',
    })) {
      for (const item of page.Items ?? []) {
        const account = accountOfItem(item);
        balances.set(account, (balances.get(account) ?? 0n) + BigInt(item.creditBalance?.N ?? '0'));
      }
    }
    return [...balances.values()].filter((balance) => balance < 0n).length;
  }

  async listAccountIds(): Promise<string[]> {
    const ids: string[] = [];
    for await (const page of pages<ScanCommandOutput>(this.wire, 'Scan', {
      TableName: this.tables.accounts,
      ProjectionExpression: 'accountId',
    })) {
      // Slice items (`<accountId>#<i>`) are parts of an account, not accounts.
      for (const item of page.Items ?? [])
        if (item.accountId?.S && !item.accountId.S.includes('#')) ids.push(item.accountId.S);
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
            activeKeys: N(0),
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
      await this.wire.call('TransactWriteItems', { TransactItems: items });
    } catch (error) {
      if (cancellationReasons(error)?.[0]?.Code === 'ConditionalCheckFailed')
        throw new AccountExistsError(accountId);
      throw error;
    }
  }

  setAccountStatus(
    accountId: string,
    status: AccountStatus,
    now: string,
    options: { cause?: string } = {},
  ): Promise<boolean> {
    return this.slices.setStatus(accountId, status, now, options.cause);
  }

  /**
   * The key item and its account's count of active keys (`activeKeys` on the account item) in one
   * transaction: the Put of the key and an ADD of 1 to the count, conditioned on the count being there
   * and, with `maxActive`, below it. So keys created at once are held to the bound, whatever their
   * number: each increment sees every earlier one. An account with no count yet (one made before it
   * was kept) has its count made first, from its active keys (startKeyCount), then the transaction is
   * sent again. Sent again too while DynamoDB cancels it for contention (a busy account's item is in
   * other transactions most of the time) or its answer is lost.
   */
  async createKey(key: KeyRecord, options: { maxActive?: number } = {}): Promise<void> {
    const { maxActive } = options;
    for (let attempt = 1; ; attempt++) {
      try {
        await retried(
          () =>
            this.wire.call('TransactWriteItems', {
              TransactItems: [
                {
                  Update: {
                    TableName: this.tables.accounts,
                    Key: { accountId: S(key.accountId) },
                    UpdateExpression: 'ADD activeKeys :one',
                    ConditionExpression:
                      maxActive === undefined
                        ? 'attribute_exists(activeKeys)'
                        : 'attribute_exists(activeKeys) AND activeKeys < :max',
                    ExpressionAttributeValues: {
                      ':one': N(1),
                      ...(maxActive === undefined ? {} : { ':max': N(maxActive) }),
                    },
                    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
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
          // Contention, throttling, an answer lost (sent again, a commit is seen on the key's Put).
          isRetryableSettlementError,
        );
        return;
      } catch (error) {
        const [account, keyPut] = cancellationReasons(error) ?? [];
        // The key is there: an earlier send of this transaction committed though its answer was lost.
        if (keyPut?.Code === 'ConditionalCheckFailed') return;
        if (account?.Code !== 'ConditionalCheckFailed') throw error;
        if (!account.Item) throw new AccountNotFoundError(key.accountId);
        if (account.Item.activeKeys?.N === undefined && attempt === 1) {
          await this.startKeyCount(key.accountId);
          continue;
        }
        throw new TooManyKeysError(key.accountId, maxActive ?? 0);
      }
    }
  }

  /**
   * Makes the account's count of active keys, if it has none, from its keys (the keys-by-account
   * index): only while it has none, so that two first keys at once make it once. Every key created
   * since counts were kept is counted by its own transaction, which needs the count to exist: what the
   * index may not show yet is at most a key made just before counts were kept. A key revoked while the
   * count is being made may be counted: the count is then one too many (keys refused one early, never
   * one too many allowed) until a revocation of a counted key.
   */
  private async startKeyCount(accountId: string): Promise<void> {
    const active = (await this.listKeys(accountId)).filter((k) => k.status === 'active').length;
    try {
      await retried(() =>
        this.wire.call('UpdateItem', {
          TableName: this.tables.accounts,
          Key: { accountId: S(accountId) },
          UpdateExpression: 'SET activeKeys = :active',
          ConditionExpression: 'attribute_exists(accountId) AND attribute_not_exists(activeKeys)',
          ExpressionAttributeValues: { ':active': N(active) },
        }),
      );
    } catch (error) {
      // Counted by another key's creation meanwhile, or no such account (the next attempt says so).
      if ((error as { name?: string }).name !== 'ConditionalCheckFailedException') throw error;
    }
  }

  /** The key item by its hash, strongly consistent (GET /api/v1/key: the caller's own key). */
  async getKey(keyHash: string): Promise<KeyRecord | undefined> {
    const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: this.tables.keys,
      Key: { keyHash: S(keyHash) },
      ConsistentRead: true,
    });
    return out.Item ? toKey(out.Item) : undefined;
  }

  async findKeyById(keyId: string): Promise<KeyRecord | undefined> {
    const found = await this.wire.call<QueryCommandOutput>('Query', {
      TableName: this.tables.keys,
      IndexName: INDEX.keysByKeyId,
      KeyConditionExpression: 'keyId = :keyId',
      ExpressionAttributeValues: { ':keyId': S(keyId) },
    });
    const item = found.Items?.[0];
    return item ? toKey(item) : undefined;
  }

  /**
   * The key marked revoked; an active one leaves its account's count of active keys in the same
   * transaction (when the account has a count: one that has none counts its keys when it needs to).
   * Revoked already, or revoked meanwhile: only its status is written again (the first time kept).
   */
  async revokeKey(keyHash: string, now: string): Promise<KeyRecord> {
    const read = await this.getKey(keyHash);
    if (read?.status === 'active') {
      const revoke = {
        TableName: this.tables.keys,
        Key: { keyHash: S(keyHash) },
        UpdateExpression: 'SET #status = :revoked, revokedAt = if_not_exists(revokedAt, :now)',
        ConditionExpression: '#status = :active AND accountId = :accountId',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: {
          ':revoked': S('revoked'),
          ':now': S(now),
          ':active': S('active'),
          ':accountId': S(read.accountId),
        },
      };
      const leaveCount = {
        TableName: this.tables.accounts,
        Key: { accountId: S(read.accountId) },
        UpdateExpression: 'ADD activeKeys :minusOne',
        ConditionExpression: 'attribute_exists(activeKeys)',
        ExpressionAttributeValues: { ':minusOne': N(-1) },
      };
      try {
        await retried(
          () =>
            this.wire.call('TransactWriteItems', {
              TransactItems: [{ Update: revoke }, { Update: leaveCount }],
            }),
          // Sent again after a lost answer, a commit fails on the key's status: counted once.
          isRetryableSettlementError,
        );
      } catch (error) {
        // Revoked meanwhile, or an account without a count: the key's own write below.
        if (!cancellationReasons(error)?.some((reason) => reason.Code === 'ConditionalCheckFailed'))
          throw error;
      }
    }
    const out = await this.wire.call<UpdateItemCommandOutput>('UpdateItem', {
      TableName: this.tables.keys,
      Key: { keyHash: S(keyHash) },
      UpdateExpression: 'SET #status = :revoked, revokedAt = if_not_exists(revokedAt, :now)',
      ConditionExpression: 'attribute_exists(keyHash)',
      ExpressionAttributeNames: { '#status': 'status' },
      ExpressionAttributeValues: { ':revoked': S('revoked'), ':now': S(now) },
      ReturnValues: 'ALL_NEW',
    });
    return toKey(out.Attributes ?? {});
  }

  /**
   * The key's daily spend cap set (or removed): found by its id (the keys-by-id index), then one
   * UpdateItem of its item conditioned on its account, so that a caller can change only its own
   * account's keys (a key of another account is KeyNotFoundError, as one that does not exist). The
   * only write a cap puts on the key item: requests read it, never write it.
   */
  async setKeyDailyCap(accountId: string, keyId: string, capNano: bigint | undefined): Promise<KeyRecord> {
    if (capNano !== undefined && capNano <= 0n) throw new RangeError('a daily cap must be above zero');
    const found = await this.findKeyById(keyId);
    if (!found || found.accountId !== accountId) throw new KeyNotFoundError(keyId);
    try {
      const out = await this.wire.call<UpdateItemCommandOutput>('UpdateItem', {
        TableName: this.tables.keys,
        Key: { keyHash: S(found.keyHash) },
        UpdateExpression: capNano === undefined ? 'REMOVE dailyCapNano' : 'SET dailyCapNano = :cap',
        ConditionExpression: 'accountId = :accountId',
        ExpressionAttributeValues: {
          ':accountId': S(accountId),
          ...(capNano === undefined ? {} : { ':cap': N(capNano) }),
        },
        ReturnValues: 'ALL_NEW',
      });
      return toKey(out.Attributes ?? {});
    } catch (error) {
      if (error instanceof Error && error.name === 'ConditionalCheckFailedException')
        throw new KeyNotFoundError(keyId);
      throw error;
    }
  }

  async listKeys(accountId: string): Promise<KeyRecord[]> {
    const items = await queryAll(this.wire, {
      TableName: this.tables.keys,
      IndexName: INDEX.keysByAccount,
      KeyConditionExpression: 'accountId = :accountId',
      ExpressionAttributeValues: { ':accountId': S(accountId) },
    });
    return items.map(toKey);
  }
}
