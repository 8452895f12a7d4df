/**
 * Holds in DynamoDB: placed with the admission check in one transaction, released by a settlement,
 * by a request that ends unbilled, or by the sweeper once expired.
 */
import type {
  GetItemCommandOutput,
  TransactWriteItemsCommandInput,
  UpdateItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { type ChargeEntry, type Hold, type HoldOutcome, utcDay } from '../../core/store.js';
import {
  holdItem,
  holdKey,
  type Item,
  isTransferItem,
  keyDayAttribute,
  N,
  S,
  sliceKey,
  slicesOf,
  toAccount,
  toHold,
} from './items.js';
import {
  cancellationReasons,
  isRetryableSettlementError,
  MAX_ATTEMPTS,
  queryAll,
  requestToken,
  retryWait,
  StorePart,
  scanAll,
  sleep,
} from './store-db.js';

export class Holds extends StorePart {
  /**
   * The hold and the admission check in one transaction: the hold item is new, and the account is
   * active with available credit (creditBalance - heldNano) above zero before this hold. Sent by the
   * direct call (wire.ts), as the settlement is: it is on the request path of every held request,
   * before its upstream call. At 160 MB's CPU share (`BENCH_HOLD_MB=160 npm run bench:holds`) it
   * added 31-33 ms at p50 to a held stream's first data chunk through the SDK client, 12-16 ms this way.
   */
  async placeHold(
    hold: Hold,
    options: { deadline?: number; capShareNano?: bigint } = {},
  ): Promise<HoldOutcome> {
    const deadline = options.deadline ?? Number.POSITIVE_INFINITY;
    // A capped key's hold also goes on its day counter, in the same update, conditioned on the
    // counter being below the slice's share of the cap (core/store.ts, "KEY DAILY CAPS").
    const counter = heldCounter(hold);
    const share = counter ? options.capShareNano : undefined;
    const input: TransactWriteItemsCommandInput = {
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
            Key: { accountId: S(sliceKey(hold.accountId, hold.slice ?? 0)) },
            UpdateExpression: counter ? 'ADD heldNano :amount, #kc :amount' : 'ADD heldNano :amount',
            ConditionExpression:
              '(attribute_not_exists(#status) OR #status = :active) AND ' +
              '(creditBalance > heldNano OR (attribute_not_exists(heldNano) AND creditBalance > :zero))' +
              (share !== undefined ? ' AND (attribute_not_exists(#kc) OR #kc < :share)' : ''),
            ExpressionAttributeNames: { '#status': 'status', ...(counter ? { '#kc': counter } : {}) },
            ExpressionAttributeValues: {
              ':amount': N(hold.amountNano),
              ':active': S('active'),
              ':zero': N(0),
              ...(share !== undefined ? { ':share': N(share) } : {}),
            },
          },
        },
      ],
    };
    // Requests of one account admitted at the same moment write the same account item: DynamoDB
    // cancels all but one with TransactionConflict. Each is sent again (the same idempotent write)
    // after a jittered wait, so a burst queues up instead of failing; never past the deadline (a
    // stalled database would otherwise hold the request for every attempt of every retry).
    for (let attempt = 1; ; attempt++) {
      try {
        await this.wire.call('TransactWriteItems', input, { deadline });
        return 'held';
      } catch (error) {
        const reasons = cancellationReasons(error);
        if (reasons) {
          const [holdReason, account] = reasons;
          if (account?.Code === 'ConditionalCheckFailed') {
            const why = await this.whyRefused(hold, deadline, share);
            // A capped key's counter moved back below its share since (a hold settled for less):
            // the condition would pass now, so the hold is sent again, as after a conflict.
            if (why !== 'retry') return why;
            if (attempt >= MAX_ATTEMPTS || Date.now() >= deadline) return 'capped';
            continue;
          }
          // Our own hold is there already: an earlier attempt committed and its answer was lost.
          if (holdReason?.Code === 'ConditionalCheckFailed') return 'held';
        }
        if (!isRetryableSettlementError(error) || attempt >= MAX_ATTEMPTS) throw error;
        const wait = retryWait(attempt);
        if (Date.now() + wait >= deadline) throw error;
        await sleep(wait);
      }
    }
  }

  /**
   * The condition checks status, credit and (for a capped key) its day counter together, and its
   * failure does not say which failed: the slice is read again (strongly consistently) to tell a
   * suspension or ban (403) from credit (402) and from the key's cap (402, 'capped'), in that order.
   * A refusal is rare (an account out of credit, one suspended during its requests, a key at its
   * cap), so this read costs nothing on the way of a request that is served. 'retry' when nothing
   * refuses it any more: a capped key's counter that was at its share came back below it (a hold
   * settled for less than it held) between the write and this read.
   */
  private async whyRefused(
    hold: Hold,
    deadline: number,
    share: bigint | undefined,
  ): Promise<HoldOutcome | 'retry'> {
    const counter = share !== undefined ? heldCounter(hold) : undefined;
    const out = await this.wire.call<GetItemCommandOutput>(
      'GetItem',
      {
        TableName: this.tables.accounts,
        Key: { accountId: S(sliceKey(hold.accountId, hold.slice ?? 0)) },
        ConsistentRead: true,
        ProjectionExpression: `#status, creditBalance, heldNano${counter ? ', #kc' : ''}`,
        ExpressionAttributeNames: { '#status': 'status', ...(counter ? { '#kc': counter } : {}) },
      },
      { deadline },
    );
    if (!out.Item) return 'banned';
    const account = toAccount(out.Item);
    if (account.status !== 'active') return account.status;
    if (account.balanceNano - account.heldNano <= 0n || share === undefined || !counter) return 'refused';
    return BigInt(out.Item[counter]?.N ?? '0') >= share ? 'capped' : 'retry';
  }

  /**
   * Gives a hold back (a request that ends unbilled; the sweeper, for an expired one), over the direct
   * call as its placement; false when it is gone already (settled, or released before).
   */
  async releaseHold(
    hold: Hold,
    options: { onlyIfExpiredAt?: number; deadline?: number } = {},
  ): Promise<boolean> {
    const expired = options.onlyIfExpiredAt !== undefined;
    // A capped key's hold comes off its day counter with the held amount.
    const counter = heldCounter(hold);
    try {
      await this.wire.call(
        'TransactWriteItems',
        {
          TransactItems: [
            {
              Delete: {
                TableName: this.tables.holds,
                Key: holdKey(hold),
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
                Key: { accountId: S(sliceKey(hold.accountId, hold.slice ?? 0)) },
                UpdateExpression: counter ? 'ADD heldNano :release, #kc :release' : 'ADD heldNano :release',
                ConditionExpression: 'attribute_exists(accountId)',
                ...(counter ? { ExpressionAttributeNames: { '#kc': counter } } : {}),
                ExpressionAttributeValues: { ':release': N(-hold.amountNano) },
              },
            },
          ],
        },
        { deadline: options.deadline ?? Number.POSITIVE_INFINITY },
      );
      return true;
    } catch (error) {
      if ((cancellationReasons(error) ?? []).some((reason) => reason.Code === 'ConditionalCheckFailed'))
        return false;
      throw error;
    }
  }

  /**
   * A settlement the function could not write in time, left for the sweeper: one transaction that
   * checks the generation has no ledger entry (else its settlement committed and only the answer was
   * lost: 'already-settled') and writes the usage record on the generation's hold item, marked
   * deferred. The item is created, of amount 0, where there is none (a request served without a hold,
   * or one whose hold was released): its settlement then releases nothing. Its key is the hold's, so
   * it stays in the partition the request's writes already go to.
   */
  async deferSettlement(
    entry: ChargeEntry,
    usageRecord: string,
    options: { hold?: Hold; deadline?: number } = {},
  ): Promise<'deferred' | 'already-settled'> {
    const deadline = options.deadline ?? Number.POSITIVE_INFINITY;
    const now = Date.now();
    // No ClientRequestToken: the write is idempotent as it is (SET of the same values), and a token
    // would answer a second deferral within ten minutes as done without checking the ledger.
    const input: TransactWriteItemsCommandInput = {
      TransactItems: [
        {
          ConditionCheck: {
            TableName: this.tables.ledger,
            Key: { accountId: S(sliceKey(entry.accountId, entry.slice)), entryId: S(entry.generationId) },
            ConditionExpression: 'attribute_not_exists(entryId)',
          },
        },
        {
          Update: {
            TableName: this.tables.holds,
            Key: holdKey({ accountId: entry.accountId, holdId: entry.generationId, slice: entry.slice }),
            UpdateExpression:
              'SET usageRecord = :record, #deferred = :true, amountNano = if_not_exists(amountNano, :zero), ' +
              'expiresAt = if_not_exists(expiresAt, :now), createdAt = if_not_exists(createdAt, :created)',
            // DEFERRED is one of DynamoDB's reserved words.
            ExpressionAttributeNames: { '#deferred': 'deferred' },
            ExpressionAttributeValues: {
              ':record': S(usageRecord),
              ':true': { BOOL: true },
              ':zero': N(0),
              ':now': N(options.hold?.expiresAt ?? now),
              ':created': S(options.hold?.createdAt ?? entry.createdAt),
            },
          },
        },
      ],
    };
    for (let attempt = 1; ; attempt++) {
      try {
        await this.wire.call('TransactWriteItems', input, { deadline });
        return 'deferred';
      } catch (error) {
        if (cancellationReasons(error)?.[0]?.Code === 'ConditionalCheckFailed') return 'already-settled';
        if (!isRetryableSettlementError(error) || attempt >= MAX_ATTEMPTS) throw error;
        const wait = retryWait(attempt);
        if (Date.now() + wait >= deadline) throw error;
        await sleep(wait);
      }
    }
  }

  /**
   * A generation's usage record, kept on its hold for the sweeper; nothing if the hold is gone. Every
   * held request writes it before its settlement, so it is sent by the direct call (wire.ts) too:
   * through the SDK client the call took 1.9 ms of CPU, this way 0.5 ms (back to back; 2.1 and 1.0 ms
   * 5 ms apart; Node 22 with the functions' heap flags, DynamoDB Local, medians of 5 rounds).
   */
  async recordUsageOnHold(hold: Hold, usageRecord: string): Promise<boolean> {
    const input: UpdateItemCommandInput = {
      TableName: this.tables.holds,
      Key: holdKey(hold),
      UpdateExpression: 'SET usageRecord = :record',
      ConditionExpression: 'attribute_exists(holdId)',
      ExpressionAttributeValues: { ':record': S(usageRecord) },
    };
    try {
      await this.wire.call('UpdateItem', input);
      return true;
    } catch (error) {
      if (error instanceof Error && error.name === 'ConditionalCheckFailedException') return false;
      throw error;
    }
  }

  async listHolds(accountId?: string): Promise<Hold[]> {
    const items: Item[] = [];
    if (accountId) {
      const head = await this.wire.call<GetItemCommandOutput>('GetItem', {
        TableName: this.tables.accounts,
        Key: { accountId: S(accountId) },
        ConsistentRead: true,
        ProjectionExpression: 'slices',
      });
      const pages = await Promise.all(
        Array.from({ length: slicesOf(head.Item) }, (_, slice) =>
          queryAll(this.wire, {
            TableName: this.tables.holds,
            KeyConditionExpression: 'accountId = :accountId',
            ExpressionAttributeValues: { ':accountId': S(sliceKey(accountId, slice)) },
            ConsistentRead: true,
          }),
        ),
      );
      items.push(...pages.flat());
    } else {
      // The holds table holds only live holds (at most one per request in flight) and transfers on their way: a scan is small.
      items.push(...(await scanAll(this.wire, { TableName: this.tables.holds, ConsistentRead: true })));
    }
    // Transfers between slices are kept in the same table (items.ts), and are not holds.
    return items
      .filter((item) => !isTransferItem(item))
      .map(toHold)
      .sort((a, b) => a.expiresAt - b.expiresAt);
  }
}

/**
 * The day counter a hold's amount is on: its key's (a capped key's hold, `keyId` set) of the UTC day
 * it was placed; undefined for a hold on the balance alone.
 */
export const heldCounter = (hold: Pick<Hold, 'keyId' | 'createdAt'>): string | undefined =>
  hold.keyId ? keyDayAttribute(utcDay(hold.createdAt), hold.keyId) : undefined;
