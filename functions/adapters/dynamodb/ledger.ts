/**
 * The ledger in DynamoDB: a charge settled in one transaction with its deduction (and its hold's
 * release), top-ups once per payment reference, and an account's entries.
 */
import { randomUUID } from 'node:crypto';
import type {
  GetItemCommandOutput,
  TransactWriteItem,
  TransactWriteItemsCommandInput,
} from '@aws-sdk/client-dynamodb';
import { sliceOfGenerationId } from '../../core/ids.js';
import {
  AccountNotFoundError,
  type ChargeEntry,
  type Contention,
  type Hold,
  type LedgerEntry,
  type SettleOutcome,
  topUpEntryId,
  utcDay,
} from '../../core/store.js';
import type { Audited } from '../../core/store-team.js';
import { byBytes } from '../../core/strings.js';
import { withAudit } from './audit.js';
import { heldCounter } from './holds.js';
import {
  chargeItem,
  dayCounterAttribute,
  holdKey,
  type Item,
  keyDayAttribute,
  keyUsageAttribute,
  N,
  S,
  sliceKey,
  slicesOf,
  toLedgerEntry,
  topUpItem,
} from './items.js';
import {
  cancellationReasons,
  type Db,
  isConflict,
  isRetryableSettlementError,
  MAX_ATTEMPTS,
  queryAll,
  requestToken,
  retryWait,
  StorePart,
  sleep,
  sortKeyPrefix,
} from './store-db.js';
import type { Transfers } from './transfers.js';

export class Ledger extends StorePart {
  constructor(
    db: Db,
    private readonly transfers: Transfers,
  ) {
    super(db);
  }

  /**
   * Which of these generations have a ledger entry, read where their settlement writes it (the
   * slice's partition, the generation id): eventually consistent, half a read unit an entry and no
   * account item read (the account items are the hot ones under load). An entry written within the
   * last second may be missed; a settlement that follows is conditioned on the entry, so that costs
   * one refused write, never a second charge. Up to 100 a call, DynamoDB's limit.
   */
  async settledAmong(entries: readonly ChargeEntry[]): Promise<Set<string>> {
    const found = new Set<string>();
    for (let at = 0; at < entries.length; at += 100) {
      const keys = entries.slice(at, at + 100).map((entry) => ({
        accountId: S(sliceKey(entry.accountId, entry.slice ?? 0)),
        entryId: S(entry.generationId),
      }));
      const items = await this.batchGet(this.tables.ledger, keys, {
        consistent: false,
        attempts: 5,
        projection: 'entryId',
      });
      for (const item of items) if (item.entryId?.S) found.add(item.entryId.S);
    }
    return found;
  }

  /**
   * Records the ledger entry and deducts its cost in ONE transaction, releasing the request's hold in
   * the same transaction. The entry must not exist yet, so a retried settlement of the same generation
   * charges once. A hold the sweeper already released is settled without it. Sent by the direct call
   * (wire.ts), not the SDK client: a JSON reply waits for it, and through the client it took about 2 ms
   * of CPU, more than a 20 ms period's quota at 160 MB.
   *
   * 'settled' means this call's own transaction wrote the entry, which is what the sweeper and the
   * logged-usage function count as billed. Its ClientRequestToken is why that holds: DynamoDB answers a
   * TransactWriteItems repeated with the same token within ten minutes of its commit as a success
   * without applying it again (and with IdempotentParameterMismatch when the token comes with another
   * payload). A token derived from the generation alone would be shared by every writer of it (the
   * function, the sweeper, the logged-usage function, `admin bill-logged`, a retried invocation): the
   * second to arrive would be told it succeeded, for the first one's write, and both would count the
   * generation billed. So the token is drawn once per call: only this call's own resends (after a lost
   * answer, a conflict, or the direct call's resend on a dead socket) share it, and a commit whose answer
   * was lost still answers 'settled' to the call that made it. Any other call is a new transaction to
   * DynamoDB, whose ledger condition fails: 'already-settled'. (Reading the entry back after a success
   * would not tell the writers apart: each writes the same entry, from the same usage record, and it
   * would cost the request path a read.)
   */
  async settleCharge(
    entry: ChargeEntry,
    options: { hold?: Hold; deadline?: number; contention?: Contention } = {},
  ): Promise<SettleOutcome> {
    const deadline = options.deadline ?? Number.POSITIVE_INFINITY;
    const contention = options.contention ?? { conflicts: 0, retries: 0 };
    const call = randomUUID();
    let hold = options.hold;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.wire.call('TransactWriteItems', this.settleInput(entry, hold, call), { deadline });
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

  /**
   * The settlement's transaction. The slice's update also adds the charge to the key's running total
   * on that slice item (`usage_<keyId>`, items.ts), which GET /api/v1/key sums: counted in the same
   * write as the charge, so exactly once, and with no further item in the transaction (a per-key item
   * would be one more item every request of a busy key meets on). Its cost is the attribute's bytes
   * on the slice item (items.ts). The same update adds it to the slice's counter of its UTC day and
   * tier (`d_<YYYYMMDD>_<tier>`, activity.ts): also once, in the same write, and no further item. The
   * sweeper moves a past day's counters to the account's day item, so a slice item carries the
   * counters of about one or two days: some 35 bytes per tier used that day. And it adds the charge
   * to the key's day counter on the slice (`kc_<YYYYMMDD>_<keyId>`, core/store.ts "KEY DAILY CAPS"),
   * every key's, capped or not (it is also the key's spend of the day, GET /api/v1/key); a capped
   * key's hold comes off its day's counter in the same ADD (one value when both are the same day's,
   * as they are: the charge's time is the generation's start, the hold's too).
   */
  private settleInput(
    entry: ChargeEntry,
    hold: Hold | undefined,
    call: string,
  ): TransactWriteItemsCommandInput {
    const keyUsage = keyUsageAttribute(entry.keyId);
    const adds = ['creditBalance :delta', '#day :billed'];
    if (hold) adds.push('heldNano :release');
    if (keyUsage) adds.push('#keyUsage :billed');
    const day = dayCounterAttribute(utcDay(entry.createdAt), entry.tier);
    const keyDay = keyDayAttribute(utcDay(entry.createdAt), entry.keyId);
    const held = hold ? heldCounter(hold) : undefined;
    const names: Record<string, string> = { '#day': day, ...(keyUsage ? { '#keyUsage': keyUsage } : {}) };
    const values: Item = {};
    if (keyDay && held === keyDay && hold) {
      adds.push('#keyDay :keyDay');
      names['#keyDay'] = keyDay;
      values[':keyDay'] = N(entry.billedNano - hold.amountNano);
    } else {
      if (keyDay) {
        adds.push('#keyDay :billed');
        names['#keyDay'] = keyDay;
      }
      if (held && hold) {
        adds.push('#keyHeld :release');
        names['#keyHeld'] = held;
      }
    }
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
          // The slice the request was admitted on (slice 0, the account item, for an unsplit account).
          Key: { accountId: S(sliceKey(entry.accountId, entry.slice ?? 0)) },
          UpdateExpression: `ADD ${adds.join(', ')}`,
          ConditionExpression: 'attribute_exists(accountId)',
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: {
            ':delta': N(-entry.billedNano),
            ...(hold ? { ':release': N(-hold.amountNano) } : {}),
            ':billed': N(entry.billedNano),
            ...values,
          },
        },
      },
    ];
    if (hold) {
      items.push({
        Delete: {
          TableName: this.tables.holds,
          Key: holdKey(hold),
          ConditionExpression: 'attribute_exists(holdId)',
        },
      });
    }
    // The token names this call (settleCharge) and the exact payload: the settlement without the hold,
    // which the call sends once the sweeper released it, is a different request.
    const kind = `${hold ? 'settle-hold' : 'settle'}${keyUsage ? '+key' : ''}`;
    return {
      ClientRequestToken: requestToken(kind, `${entry.generationId}:${call}`),
      TransactItems: items,
    };
  }

  /**
   * A top-up: its ledger entry and its amount on slice 0 (the account item) in one transaction, once
   * per reference; sent again only when DynamoDB cancelled it (a conflict or throttling: nothing was
   * written), so a second run with the same reference still answers false. Then, for an account split into slices, the
   * amount is spread evenly over them by transfers (transfers.ts): one transaction over every slice of a
   * busy account would nearly never find them all free at once.
   */
  async topUp(
    accountId: string,
    reference: string,
    amountNano: bigint,
    now: string,
    { audit }: Audited = {},
  ): Promise<boolean> {
    const input = {
      TransactItems: withAudit<object>(
        [
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
          // Its audit entry (a purchase, an auto top-up, an operator's credit): with it or not at all.
        ],
        audit,
        this.tables,
      ),
    };
    for (let attempt = 1; ; attempt++) {
      try {
        await this.wire.call('TransactWriteItems', input);
        break;
      } catch (error) {
        const reasons = cancellationReasons(error);
        const [ledger, account] = reasons ?? [];
        if (account?.Code === 'ConditionalCheckFailed') throw new AccountNotFoundError(accountId);
        if (ledger?.Code === 'ConditionalCheckFailed') return false;
        if (!reasons || !isRetryableSettlementError(error) || attempt >= MAX_ATTEMPTS) throw error;
        await sleep(retryWait(attempt));
      }
    }
    const slices = slicesOf(await this.head(accountId, 'slices'));
    try {
      await this.transfers.spread(accountId, slices, amountNano);
    } catch (error) {
      // The top-up itself is written (with its ledger entry, on slice 0): say so with the fault.
      const reason = error instanceof Error ? error.message : String(error);
      throw new Error(`top-up ${reference} is applied; spreading it over the slices stopped: ${reason}`);
    }
    return true;
  }

  /** The account's entries, over all its slices' partitions, oldest first. */
  async listLedger(accountId: string): Promise<LedgerEntry[]> {
    const slices = slicesOf(await this.head(accountId, 'slices'));
    const pages = await Promise.all(
      Array.from({ length: slices }, (_, slice) =>
        queryAll(this.wire, {
          TableName: this.tables.ledger,
          KeyConditionExpression: 'accountId = :accountId',
          ExpressionAttributeValues: { ':accountId': S(sliceKey(accountId, slice)) },
          ConsistentRead: true,
        }),
      ),
    );
    return pages
      .flat()
      .map(toLedgerEntry)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || byBytes(a.entryId, b.entryId));
  }

  /**
   * The sum of the account's top-ups (initial credits included): its own partition's `topup#`
   * entries, one strongly consistent Query (top-ups are few; charges of slice 0 share the partition
   * but not the prefix, and only the amounts are read).
   */
  async totalCredits(accountId: string): Promise<bigint> {
    const items = await queryAll(this.wire, {
      TableName: this.tables.ledger,
      KeyConditionExpression: `accountId = :accountId AND ${sortKeyPrefix('entryId', topUpEntryId('')).condition}`,
      ExpressionAttributeValues: {
        ':accountId': S(accountId),
        ...sortKeyPrefix('entryId', topUpEntryId('')).values,
      },
      ProjectionExpression: 'amountNanoUsd',
      ConsistentRead: true,
    });
    return items.reduce((sum, item) => sum + BigInt(item.amountNanoUsd?.N ?? '0'), 0n);
  }

  /**
   * One entry: a charge is in the partition of the slice its generation id names, a top-up (and a
   * charge made before slices, whose id names no slice) in the account's own.
   */
  async getLedgerEntry(accountId: string, entryId: string): Promise<LedgerEntry | undefined> {
    const slice = sliceOfGenerationId(entryId) ?? 0;
    const places = slice === 0 ? [0] : [slice, 0];
    for (const place of places) {
      const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
        TableName: this.tables.ledger,
        Key: { accountId: S(sliceKey(accountId, place)), entryId: S(entryId) },
        ConsistentRead: true,
      });
      if (out.Item) return toLedgerEntry(out.Item);
    }
    return undefined;
  }

  private async head(accountId: string, projection: string): Promise<Item | undefined> {
    const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: this.tables.accounts,
      Key: { accountId: S(accountId) },
      ConsistentRead: true,
      ProjectionExpression: projection,
    });
    return out.Item;
  }
}
