/**
 * Accounts in DynamoDB: the request path's one read of a key and its account, and the operator's
 * account writes (accounts created with their initial credits, statuses). Keys' own reads and writes
 * are in keys.ts.
 */
import type {
  BatchGetItemCommandOutput,
  GetItemCommandOutput,
  ScanCommandOutput,
  TransactWriteItem,
} from '@aws-sdk/client-dynamodb';
import type { AccountStatus, Principal } from '../../core/access.js';
import { AccountExistsError, type AccountRecord, topUpEntryId } from '../../core/store.js';
import { accountOfItem, type Item, N, S, sliceKey, slicesOf, toPrincipal, topUpItem } from './items.js';
import { SliceCredit } from './slice-credit.js';
import { Slices } from './slices.js';
import { cancellationReasons, type Db, pages, StorePart, sleep } from './store-db.js';

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
}
