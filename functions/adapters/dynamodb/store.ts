/**
 * The DynamoDB implementation of the store port (core/store.ts). The request path costs one strongly
 * consistent read before the upstream call and one transactional write after the last token; an
 * account that could overdraw adds one conditional hold write before it.
 * SDK exceptions become domain outcomes here (a failed condition is 'refused', 'already-settled',
 * AccountNotFoundError...); anything else is rethrown.
 */
import { createHash } from 'node:crypto';
import {
  type BatchGetItemCommandOutput,
  type DynamoDBClient,
  GetItemCommand,
  paginateQuery,
  paginateScan,
  QueryCommand,
  type QueryCommandInput,
  TransactionCanceledException,
  type TransactWriteItem,
  TransactWriteItemsCommand,
  type TransactWriteItemsCommandInput,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import type { AccountStatus, Principal } from '../../core/access.js';
import {
  AccountExistsError,
  AccountNotFoundError,
  type AccountRecord,
  type ChargeEntry,
  type Hold,
  type KeyRecord,
  type LedgerEntry,
  type SettleOutcome,
  type Store,
  topUpEntryId,
} from '../../core/store.js';
import {
  chargeItem,
  holdItem,
  type Item,
  keyItem,
  N,
  S,
  type TableNames,
  toAccount,
  toHold,
  toKey,
  toLedgerEntry,
  toPrincipal,
  topUpItem,
} from './items.js';
import { type DynamoTimeouts, dynamoTimeouts } from './timeouts.js';
import { type CancellationReason, DynamoWire, DynamoWireError } from './wire.js';

const SETTLE_ATTEMPTS = 8;
const HOLD_ATTEMPTS = 10;

export class DynamoStore implements Store {
  /** keyHash -> accountId. The mapping never changes, so it may live across requests (revocation, status and balance are read fresh every time). */
  private readonly accountOfKey = new Map<string, string>();
  private static readonly CACHE_LIMIT = 10_000;

  /** The request path's read and settlement, without the SDK client's middleware stack (wire.ts). */
  readonly wire: DynamoWire;

  constructor(
    readonly client: DynamoDBClient,
    readonly tables: TableNames,
    timeouts: DynamoTimeouts = dynamoTimeouts(),
  ) {
    this.wire = new DynamoWire(client, timeouts);
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
    const key = await this.client.send(
      new GetItemCommand({ TableName: this.tables.keys, Key: { keyHash: S(keyHash) }, ConsistentRead: true }),
    );
    if (!key.Item) return undefined;
    const accountId = key.Item.accountId?.S;
    if (!accountId) return undefined;
    const account = await this.client.send(
      new GetItemCommand({
        TableName: this.tables.accounts,
        Key: { accountId: S(accountId) },
        ConsistentRead: true,
      }),
    );
    this.remember(keyHash, accountId);
    return toPrincipal(key.Item, account.Item);
  }

  private remember(keyHash: string, accountId: string): void {
    if (this.accountOfKey.size >= DynamoStore.CACHE_LIMIT) {
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

  /**
   * The hold and the admission check in one transaction: the hold item is new, and the account is
   * active with available credit (creditBalance - heldNano) above zero before this hold.
   */
  async placeHold(hold: Hold): Promise<'held' | 'refused'> {
    const command = new TransactWriteItemsCommand({
      ClientRequestToken: requestToken('hold', hold.holdId),
      TransactItems: [
        {
          Put: {
            TableName: this.tables.holds,
            Item: holdItem(hold),
            ConditionExpression: 'attribute_not_exists(holdId)',
          },
        },
        {
          Update: {
            TableName: this.tables.accounts,
            Key: { accountId: S(hold.accountId) },
            UpdateExpression: 'ADD heldNano :amount',
            ConditionExpression:
              '(attribute_not_exists(#status) OR #status = :active) AND ' +
              '(creditBalance > heldNano OR (attribute_not_exists(heldNano) AND creditBalance > :zero))',
            ExpressionAttributeNames: { '#status': 'status' },
            ExpressionAttributeValues: {
              ':amount': N(hold.amountNano),
              ':active': S('active'),
              ':zero': N(0),
            },
          },
        },
      ],
    });
    // Requests of one account admitted at the same moment write the same account item: DynamoDB
    // cancels all but one with TransactionConflict. Each is sent again (the same idempotent write)
    // after a jittered wait, so a burst queues up instead of failing.
    for (let attempt = 1; ; attempt++) {
      try {
        await this.client.send(command);
        return 'held';
      } catch (error) {
        if (error instanceof TransactionCanceledException) {
          const [holdReason, account] = error.CancellationReasons ?? [];
          if (account?.Code === 'ConditionalCheckFailed') return 'refused';
          // Our own hold is there already: an earlier attempt committed and its answer was lost.
          if (holdReason?.Code === 'ConditionalCheckFailed') return 'held';
        }
        if (!isRetryableSettlementError(error) || attempt >= HOLD_ATTEMPTS) throw error;
        await sleep(Math.random() * Math.min(400, 10 * 2 ** attempt));
      }
    }
  }

  /**
   * Records the ledger entry and deducts its cost in ONE transaction, releasing the request's hold in
   * the same transaction. The entry must not exist yet, so a retried settlement of the same generation
   * charges once; the ClientRequestToken makes a retry of a committed transaction (one whose answer was
   * lost) idempotent too. A hold the sweeper already released is settled without it. Sent by the direct
   * call (wire.ts), not the SDK client: a JSON reply waits for it, and through the client it took about
   * 2 ms of CPU, more than a 20 ms period's quota at 160 MB.
   */
  async settleCharge(
    entry: ChargeEntry,
    options: { hold?: Hold; deadline?: number } = {},
  ): Promise<SettleOutcome> {
    const deadline = options.deadline ?? Number.POSITIVE_INFINITY;
    let hold = options.hold;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.wire.call('TransactWriteItems', this.settleInput(entry, hold), { deadline });
        return 'settled';
      } catch (error) {
        const reasons = cancellationReasons(error);
        if (reasons) {
          const [ledger, account, holdReason] = reasons;
          if (ledger?.Code === 'ConditionalCheckFailed') return 'already-settled';
          if (account?.Code === 'ConditionalCheckFailed') throw new AccountNotFoundError(entry.accountId);
          if (holdReason?.Code === 'ConditionalCheckFailed') {
            // Expired and released by the sweeper: its amount is no longer held; charge without it.
            hold = undefined;
            continue;
          }
        }
        if (!isRetryableSettlementError(error) || attempt >= SETTLE_ATTEMPTS) throw error;
        // Every attempt and wait stays inside the deadline (the invocation's own): a settlement that
        // cannot finish in time is a billing failure (logged with its usage record), not a killed function.
        const wait = Math.random() * 25 * 2 ** attempt;
        if (Date.now() + wait >= deadline) throw error;
        await sleep(wait);
      }
    }
  }

  private settleInput(entry: ChargeEntry, hold: Hold | undefined): TransactWriteItemsCommandInput {
    const items: TransactWriteItem[] = [
      {
        Put: {
          TableName: this.tables.ledger,
          Item: chargeItem(entry),
          ConditionExpression: 'attribute_not_exists(entryId)',
        },
      },
      {
        Update: {
          TableName: this.tables.accounts,
          Key: { accountId: S(entry.accountId) },
          UpdateExpression: hold ? 'ADD creditBalance :delta, heldNano :release' : 'ADD creditBalance :delta',
          ConditionExpression: 'attribute_exists(accountId)',
          ExpressionAttributeValues: {
            ':delta': N(-entry.billedNano),
            ...(hold ? { ':release': N(-hold.amountNano) } : {}),
          },
        },
      },
    ];
    if (hold) {
      items.push({
        Delete: {
          TableName: this.tables.holds,
          Key: { accountId: S(hold.accountId), holdId: S(hold.holdId) },
          ConditionExpression: 'attribute_exists(holdId)',
        },
      });
    }
    // The token names the exact payload: the settlement without the hold is a different request.
    return {
      ClientRequestToken: requestToken(hold ? 'settle-hold' : 'settle', entry.generationId),
      TransactItems: items,
    };
  }

  async releaseHold(hold: Hold, options: { onlyIfExpiredAt?: number } = {}): Promise<boolean> {
    const expired = options.onlyIfExpiredAt !== undefined;
    try {
      await this.client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            {
              Delete: {
                TableName: this.tables.holds,
                Key: { accountId: S(hold.accountId), holdId: S(hold.holdId) },
                ConditionExpression: expired
                  ? 'attribute_exists(holdId) AND expiresAt <= :now'
                  : 'attribute_exists(holdId)',
                ...(expired
                  ? { ExpressionAttributeValues: { ':now': N(options.onlyIfExpiredAt ?? 0) } }
                  : {}),
              },
            },
            {
              Update: {
                TableName: this.tables.accounts,
                Key: { accountId: S(hold.accountId) },
                UpdateExpression: 'ADD heldNano :release',
                ConditionExpression: 'attribute_exists(accountId)',
                ExpressionAttributeValues: { ':release': N(-hold.amountNano) },
              },
            },
          ],
        }),
      );
      return true;
    } catch (error) {
      if (
        error instanceof TransactionCanceledException &&
        (error.CancellationReasons ?? []).some((reason) => reason.Code === 'ConditionalCheckFailed')
      )
        return false;
      throw error;
    }
  }

  async listHolds(accountId?: string): Promise<Hold[]> {
    const items: Item[] = [];
    if (accountId) {
      items.push(
        ...(await this.queryAll({
          TableName: this.tables.holds,
          KeyConditionExpression: 'accountId = :accountId',
          ExpressionAttributeValues: { ':accountId': S(accountId) },
          ConsistentRead: true,
        })),
      );
    } else {
      // The holds table holds only live holds (at most one per request in flight): a scan is small.
      for await (const page of paginateScan(
        { client: this.client },
        { TableName: this.tables.holds, ConsistentRead: true },
      ))
        items.push(...(page.Items ?? []));
    }
    return items.map(toHold).sort((a, b) => a.expiresAt - b.expiresAt);
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

  async topUp(accountId: string, reference: string, amountNano: bigint, now: string): Promise<boolean> {
    try {
      await this.client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            {
              Put: {
                TableName: this.tables.ledger,
                Item: topUpItem(accountId, topUpEntryId(reference), reference, amountNano, now),
                ConditionExpression: 'attribute_not_exists(entryId)',
              },
            },
            {
              Update: {
                TableName: this.tables.accounts,
                Key: { accountId: S(accountId) },
                UpdateExpression: 'ADD creditBalance :amount',
                ConditionExpression: 'attribute_exists(accountId)',
                ExpressionAttributeValues: { ':amount': N(amountNano) },
              },
            },
          ],
        }),
      );
      return true;
    } catch (error) {
      if (!(error instanceof TransactionCanceledException)) throw error;
      const [ledger, account] = error.CancellationReasons ?? [];
      if (account?.Code === 'ConditionalCheckFailed') throw new AccountNotFoundError(accountId);
      if (ledger?.Code === 'ConditionalCheckFailed') return false;
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
        IndexName: 'byKeyId',
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
    const items = await this.queryAll({
      TableName: this.tables.keys,
      IndexName: 'byAccount',
      KeyConditionExpression: 'accountId = :accountId',
      ExpressionAttributeValues: { ':accountId': S(accountId) },
    });
    return items.map(toKey);
  }

  async listLedger(accountId: string): Promise<LedgerEntry[]> {
    const items = await this.queryAll({
      TableName: this.tables.ledger,
      KeyConditionExpression: 'accountId = :accountId',
      ExpressionAttributeValues: { ':accountId': S(accountId) },
      ConsistentRead: true,
    });
    return items
      .map(toLedgerEntry)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.entryId.localeCompare(b.entryId));
  }

  async getLedgerEntry(accountId: string, entryId: string): Promise<LedgerEntry | undefined> {
    const out = await this.client.send(
      new GetItemCommand({
        TableName: this.tables.ledger,
        Key: { accountId: S(accountId), entryId: S(entryId) },
        ConsistentRead: true,
      }),
    );
    return out.Item ? toLedgerEntry(out.Item) : undefined;
  }

  /** Every item a query matches, through the SDK's own paginator. */
  private async queryAll(input: QueryCommandInput): Promise<Item[]> {
    const items: Item[] = [];
    for await (const page of paginateQuery({ client: this.client }, input)) items.push(...(page.Items ?? []));
    return items;
  }
}

/** The reasons of a cancelled transaction, whether the SDK client or the direct call (wire.ts) saw it. */
export function cancellationReasons(error: unknown): CancellationReason[] | undefined {
  if (error instanceof TransactionCanceledException) return error.CancellationReasons ?? [];
  if (error instanceof DynamoWireError && error.name === 'TransactionCanceledException')
    return error.cancellationReasons ?? [];
  return undefined;
}

/** Conflicts, throttling and lost responses: safe to send again because the write is idempotent. */
export function isRetryableSettlementError(error: unknown): boolean {
  const reasons = cancellationReasons(error);
  if (reasons) {
    return reasons.some((reason) =>
      ['TransactionConflict', 'ThrottlingError', 'ProvisionedThroughputExceeded'].includes(reason.Code ?? ''),
    );
  }
  const name = (error as { name?: string } | undefined)?.name ?? '';
  return [
    'TransactionConflictException',
    'TransactionInProgressException',
    'ThrottlingException',
    'ProvisionedThroughputExceededException',
    'RequestLimitExceeded',
    'InternalServerError',
    'TimeoutError',
    'RequestTimeout',
  ].includes(name);
}

/** A ClientRequestToken (at most 36 characters) naming one kind of write for one generation. */
function requestToken(kind: string, id: string): string {
  return createHash('sha256').update(`${kind}:${id}`).digest('base64url').slice(0, 36);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
