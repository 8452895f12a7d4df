/**
 * The ledger in DynamoDB: a charge settled in one transaction with its deduction (and its hold's
 * release), top-ups once per payment reference, and an account's entries.
 */
import {
  type DynamoDBClient,
  GetItemCommand,
  TransactionCanceledException,
  type TransactWriteItem,
  TransactWriteItemsCommand,
  type TransactWriteItemsCommandInput,
} from '@aws-sdk/client-dynamodb';
import {
  AccountNotFoundError,
  type ChargeEntry,
  type Contention,
  type Hold,
  type LedgerEntry,
  type SettleOutcome,
  topUpEntryId,
} from '../../core/store.js';
import { chargeItem, N, S, type TableNames, toLedgerEntry, topUpItem } from './items.js';
import {
  cancellationReasons,
  type Db,
  isConflict,
  isRetryableSettlementError,
  queryAll,
  requestToken,
  sleep,
} from './store-db.js';
import type { DynamoWire } from './wire.js';

/**
 * A settlement is sent again after a conflict, throttling or a lost answer for as long as its deadline
 * allows, waiting a random time up to an exponentially growing ceiling ("full jitter", as AWS's SDKs
 * retry): 20 ms, 40 ms ... capped at 640 ms, so that transactions which met on one item spread out
 * over a window as wide as the crowd that met there, rather than meeting again. The deadline (the
 * invocation's own) is the bound, and what is still unwritten then is deferred
 * (store.deferSettlement), not lost; 40 attempts bound a caller without one (the sweeper, the CLI).
 */
export const MAX_ATTEMPTS = 40;

export function retryWait(attempt: number): number {
  return Math.random() * Math.min(640, 10 * 2 ** attempt);
}

export class Ledger {
  private readonly client: DynamoDBClient;
  private readonly tables: TableNames;
  private readonly wire: DynamoWire;

  constructor(db: Db) {
    this.client = db.client;
    this.tables = db.tables;
    this.wire = db.wire;
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
    options: { hold?: Hold; deadline?: number; contention?: Contention } = {},
  ): Promise<SettleOutcome> {
    const deadline = options.deadline ?? Number.POSITIVE_INFINITY;
    const contention = options.contention ?? { conflicts: 0, retries: 0 };
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
        if (isConflict(error)) contention.conflicts += 1;
        if (!isRetryableSettlementError(error) || attempt >= MAX_ATTEMPTS) throw error;
        // Every attempt and wait stays inside the deadline (the invocation's own): a settlement that
        // cannot finish in time is deferred to the sweeper by the caller, not a killed function.
        const wait = retryWait(attempt);
        if (Date.now() + wait >= deadline) throw error;
        contention.retries += 1;
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

  async listLedger(accountId: string): Promise<LedgerEntry[]> {
    const items = await queryAll(this.client, {
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
}
