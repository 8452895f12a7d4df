/**
 * An account's balance slices in DynamoDB (core/store.ts, "slices"): reading them all (the account's
 * totals as of one instant, or the richest slice when the one a request drew is dry), credit moved
 * between them, and an account split into more; the status on every one is slice-status.ts.
 */
import type {
  GetItemCommandOutput,
  TransactGetItemsCommandOutput,
  TransactWriteItem,
} from '@aws-sdk/client-dynamodb';
import type { AccountStatus } from '../../core/access.js';
import { AccountNotFoundError, type AccountRecord, MAX_SLICES } from '../../core/store.js';
import {
  type Item,
  keyDayAttribute,
  keyUsageAttribute,
  N,
  S,
  sliceKey,
  slicesOf,
  toAccount,
} from './items.js';
import { setSliceStatus } from './slice-status.js';
import {
  cancellationReasons,
  isRetryableSettlementError,
  MAX_ATTEMPTS,
  retryWait,
  StorePart,
  sleep,
} from './store-db.js';
import { watchOfHead } from './watch-copy.js';

/** DynamoDB refused the whole call for throughput. */
const isThrottling = (error: unknown): boolean =>
  ['ThrottlingException', 'ProvisionedThroughputExceededException', 'RequestLimitExceeded'].includes(
    (error as { name?: string } | undefined)?.name ?? '',
  );

export class Slices extends StorePart {
  /** The account item (slice 0), read strongly consistently. */
  async head(accountId: string): Promise<Item | undefined> {
    const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: this.tables.accounts,
      Key: { accountId: S(accountId) },
      ConsistentRead: true,
    });
    return out.Item;
  }

  /**
   * Slices `from` to `to - 1`, read strongly consistently in one BatchGetItem each 100; index = slice.
   * Each item as of its own read, not all as of one instant: a total is read by `snapshot`.
   */
  async read(accountId: string, from: number, to: number): Promise<(Item | undefined)[]> {
    return this.readSome(accountId, from, to, { attempts: 5, consistent: true });
  }

  /**
   * Every slice, for a view of where the account's credit is (slice-credit.ts), in one eventually
   * consistent BatchGetItem (half a read unit an item) and no more: what DynamoDB throttles is left
   * out rather than waited for, and a throttled call reads none. The view only chooses which slice to
   * read strongly; nothing is admitted on it.
   */
  async readForAdmission(accountId: string, slices: number): Promise<(Item | undefined)[]> {
    try {
      return await this.readSome(accountId, 0, slices, { attempts: 1, consistent: false });
    } catch (error) {
      if (isThrottling(error)) return [];
      throw error;
    }
  }

  /** One slice, read strongly consistently in one GetItem; undefined if it is not there or DynamoDB throttles the read. */
  async readOne(accountId: string, slice: number): Promise<Item | undefined> {
    try {
      const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
        TableName: this.tables.accounts,
        Key: { accountId: S(sliceKey(accountId, slice)) },
        ConsistentRead: true,
      });
      return out.Item;
    } catch (error) {
      if (isThrottling(error)) return undefined;
      throw error;
    }
  }

  private async readSome(
    accountId: string,
    from: number,
    to: number,
    { attempts, consistent }: { attempts: number; consistent: boolean },
  ): Promise<(Item | undefined)[]> {
    const keys = Array.from({ length: to - from }, (_, i) => ({
      accountId: S(sliceKey(accountId, from + i)),
    }));
    const found = new Map<string, Item>();
    for (const item of await this.batchGet(this.tables.accounts, keys, { attempts, consistent }))
      found.set(item.accountId?.S ?? '', item);
    return Array.from({ length: to - from }, (_, i) => found.get(sliceKey(accountId, from + i)));
  }

  /**
   * Every slice of the account as of one instant (index = slice; undefined if the account is not
   * there), for a total: what a transfer between two slices moves must be seen on both or on neither.
   * BatchGetItem does not give that: DynamoDB reads each of its items on its own (read-committed
   * against a transaction, "Isolation levels for DynamoDB transactions"), so a transfer that commits
   * between two of them is seen half, its amount counted twice or not at all. TransactGetItems is
   * serializable against TransactWriteItems: all of a transaction's writes or none of them. An unsplit
   * account is its item alone, one strongly consistent GetItem. Otherwise one TransactGetItems of the
   * account item and every slice (MAX_SLICES, 62, is within its 100 items), none of its attempts past
   * `deadline` (wire.ts). DynamoDB cancels it (`TransactionConflict`) while a write is in flight on any
   * of the items, which on a busy account is often: sent again with the settlements' jittered backoff,
   * until `deadline` or MAX_ATTEMPTS. A split that committed meanwhile (the account item's count is
   * read in the same snapshot) makes it read the new slices too.
   */
  async snapshot(accountId: string, options: { deadline?: number } = {}): Promise<Item[] | undefined> {
    const deadline = options.deadline ?? Number.POSITIVE_INFINITY;
    const head = await this.head(accountId);
    if (!head) return undefined;
    let slices = slicesOf(head);
    if (slices === 1) return [head];
    for (let attempt = 1; ; attempt++) {
      try {
        const out = await this.wire.call<TransactGetItemsCommandOutput>(
          'TransactGetItems',
          {
            TransactItems: Array.from({ length: slices }, (_, slice) => ({
              Get: { TableName: this.tables.accounts, Key: { accountId: S(sliceKey(accountId, slice)) } },
            })),
          },
          Number.isFinite(deadline) ? { deadline } : {},
        );
        const items = Array.from({ length: slices }, (_, slice) => out.Responses?.[slice]?.Item);
        const [read] = items;
        if (!read) return undefined;
        if (slicesOf(read) === slices) return items.map((item) => item ?? {});
        slices = slicesOf(read);
      } catch (error) {
        if (!isRetryableSettlementError(error) || attempt >= MAX_ATTEMPTS) throw error;
        const wait = retryWait(attempt);
        if (Date.now() + wait >= deadline) throw error;
        await sleep(wait);
      }
    }
  }

  /**
   * The account's record: its status, and its balance and held amounts summed over its slices, as of
   * one instant (snapshot).
   */
  async account(accountId: string, options: { deadline?: number } = {}): Promise<AccountRecord | undefined> {
    const items = await this.snapshot(accountId, options);
    const [head, ...others] = items ?? [];
    if (!head) return undefined;
    const record = toAccount(head);
    for (const item of others) {
      record.balanceNano += BigInt(item.creditBalance?.N ?? '0');
      record.heldNano += BigInt(item.heldNano?.N ?? '0');
    }
    return record;
  }

  /**
   * The account's balance summed over its slices, for a refusal to state (accounts-keys.ts): one
   * strongly consistent BatchGetItem of the `slices` it is known to have, and of the others if the
   * account item says a split made more since. Undefined if the account is gone. Each item as of its
   * own read, not a snapshot: a settlement writes one slice, so the sum lies between the balance when
   * the read began and when it ended, but a transfer between two slices that commits during the read
   * (a top-up being spread, a rebalance) may be seen on one of them only. A snapshot would cost twice
   * the read units and be cancelled while any slice is in a settlement.
   */
  async balance(accountId: string, slices: number): Promise<bigint | undefined> {
    const items = await this.read(accountId, 0, slices);
    const [head] = items;
    if (!head) return undefined;
    if (slicesOf(head) > slices) items.push(...(await this.read(accountId, slices, slicesOf(head))));
    return items.reduce((sum, item) => sum + BigInt(item?.creditBalance?.N ?? '0'), 0n);
  }

  /**
   * What the key has spent: its running total (`usage_<keyId>`, items.ts) summed over the account's
   * slices. The account item says how many there are; the others are one strongly consistent
   * BatchGetItem. Not a snapshot, and it need not be one: no transaction writes the total on two
   * slices (a settlement adds to its own slice's, a transfer moves no usage), so no item read on its
   * own can see a transaction half, and the sum lies between what the key had spent when the read
   * began and when it ended. A snapshot would be cancelled while any slice is in a settlement, which
   * on a split account is most of the time. 0 for a key id that is not one, or an account that is gone.
   */
  async keyUsage(accountId: string, keyId: string): Promise<bigint> {
    return this.sumOverSlices(accountId, keyUsageAttribute(keyId));
  }

  /** keyUsage of several keys: the same reads as for one, each item's totals taken together. */
  async keysUsage(accountId: string, keyIds: readonly string[]): Promise<Map<string, bigint>> {
    const sums = await this.sumsOverSlices(accountId, keyIds.map(keyUsageAttribute));
    return new Map(keyIds.map((keyId, i) => [keyId, sums[i] ?? 0n]));
  }

  /**
   * What the key committed on UTC day `day`: its day counter (`kc_<YYYYMMDD>_<keyId>`, items.ts)
   * summed over the slices, read as keyUsage reads its total (no transaction writes it on two slices).
   */
  async keyDailySpend(accountId: string, keyId: string, day: string): Promise<bigint> {
    return (await this.keysDailySpend(accountId, [keyId], day)).get(keyId) ?? 0n;
  }

  /** keyDailySpend of several keys: the same reads as for one, each item's counters taken together. */
  async keysDailySpend(
    accountId: string,
    keyIds: readonly string[],
    day: string,
  ): Promise<Map<string, bigint>> {
    const sums = await this.sumsOverSlices(
      accountId,
      keyIds.map((keyId) => keyDayAttribute(day, keyId)),
    );
    return new Map(keyIds.map((keyId, i) => [keyId, sums[i] ?? 0n]));
  }

  private async sumOverSlices(accountId: string, attribute: string | undefined): Promise<bigint> {
    return (await this.sumsOverSlices(accountId, [attribute]))[0] ?? 0n;
  }

  /** Each attribute summed over the account's slices (0 for none, or an account that is gone), in one pass. */
  private async sumsOverSlices(accountId: string, attributes: (string | undefined)[]): Promise<bigint[]> {
    const none = attributes.map(() => 0n);
    if (!attributes.some(Boolean)) return none;
    const head = await this.head(accountId);
    if (!head) return none;
    const slices = slicesOf(head);
    const items = slices === 1 ? [head] : [head, ...(await this.read(accountId, 1, slices))];
    return attributes.map((attribute) =>
      attribute ? items.reduce((sum, item) => sum + BigInt(item?.[attribute]?.N ?? '0'), 0n) : 0n,
    );
  }

  /** The status on the account item and every slice, converging whatever runs at once (slice-status.ts). */
  setStatus(accountId: string, status: AccountStatus, now: string, cause?: string): Promise<boolean> {
    return setSliceStatus(this.wire, this.tables, accountId, status, now, cause);
  }

  /**
   * Splits the account into `slices` slices (never fewer than it has): the new slice items, empty and
   * with the account's status and its number (`statusVersion`, setStatus), and the account item's new
   * count, in one transaction conditioned on the count, status and number it read (a concurrent split
   * or status command makes it read again: a command that updated the account item before this commit
   * is copied, one after it counts the new slices; the balance may change meanwhile, it is not moved
   * here). The account's total never changes; the store then evens the credit out (transfers.ts).
   */
  async split(accountId: string, slices: number): Promise<number> {
    if (!Number.isInteger(slices) || slices < 1 || slices > MAX_SLICES)
      throw new RangeError(`slices must be 1-${MAX_SLICES}`);
    for (let attempt = 1; ; attempt++) {
      const head = await this.head(accountId);
      if (!head) throw new AccountNotFoundError(accountId);
      const record = toAccount(head);
      if (slices <= record.slices) return record.slices;
      const version = head.statusVersion;
      const items: TransactWriteItem[] = [
        {
          Update: {
            TableName: this.tables.accounts,
            Key: { accountId: S(accountId) },
            UpdateExpression: 'SET slices = :slices',
            ConditionExpression: [
              head.status ? '#status = :status' : 'attribute_not_exists(#status)',
              version ? 'statusVersion = :version' : 'attribute_not_exists(statusVersion)',
              record.slices === 1 ? 'attribute_not_exists(slices)' : 'slices = :was',
            ].join(' AND '),
            ExpressionAttributeNames: { '#status': 'status' },
            ExpressionAttributeValues: {
              ':slices': N(slices),
              ...(head.status ? { ':status': S(record.status) } : {}),
              ...(version ? { ':version': version } : {}),
              ...(record.slices === 1 ? {} : { ':was': N(record.slices) }),
            },
          },
        },
      ];
      for (let slice = record.slices; slice < slices; slice++)
        items.push({
          Put: {
            TableName: this.tables.accounts,
            Item: {
              accountId: S(sliceKey(accountId, slice)),
              sliceOf: S(accountId),
              status: S(record.status),
              ...(version ? { statusVersion: version } : {}),
              creditBalance: N(0),
              heldNano: N(0),
              // The balance watch's levels, as the account item has them (watch-copy.ts).
              ...watchOfHead(head),
            },
            ConditionExpression: 'attribute_not_exists(accountId)',
          },
        });
      if (await this.transact(items, attempt)) break;
    }
    return slices;
  }

  /** True if committed; false to read again (a condition failed or a conflict); throws past the attempts. */
  private async transact(items: TransactWriteItem[], attempt: number): Promise<boolean> {
    try {
      await this.wire.call('TransactWriteItems', { TransactItems: items });
      return true;
    } catch (error) {
      if (!cancellationReasons(error) || attempt >= MAX_ATTEMPTS) throw error;
      await sleep(retryWait(attempt));
      return false;
    }
  }
}
