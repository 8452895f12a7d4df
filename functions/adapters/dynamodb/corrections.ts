/**
 * What only the operator does beside top-ups: credit taken back (a refund by hand, a correction),
 * once per reference, and the accounts read a page at a time. Neither is ever on a request's path.
 *
 * A correction is a ledger entry of slice 0's partition, as a top-up is: `correction#<reference>`,
 * `type` correction, `reference`, and `amountNanoUsd` (N, positive; the type gives the sign, as
 * items.ts says of every entry), written in one transaction with its deduction from the account item.
 */
import type { GetItemCommandOutput, ScanCommandOutput } from '@aws-sdk/client-dynamodb';
import {
  AccountNotFoundError,
  type AccountPage,
  type AccountRecord,
  type CorrectionOutcome,
  correctionEntryId,
} from '../../core/store.js';
import type { Audited } from '../../core/store-team.js';
import { withAudit } from './audit.js';
import { type Item, N, S, sliceKey, slicesOf, toAccount } from './items.js';
import type { Slices } from './slices.js';
import {
  cancellationReasons,
  type Db,
  isRetryableSettlementError,
  MAX_ATTEMPTS,
  queryAll,
  retryWait,
  StorePart,
  sleep,
  sortKeyPrefix,
} from './store-db.js';
import type { Transfers } from './transfers.js';

const PREFIX = correctionEntryId('');

/** A slice item's available credit: its balance minus what it holds. */
const availableOf = (item: Item | undefined): bigint =>
  BigInt(item?.creditBalance?.N ?? '0') - BigInt(item?.heldNano?.N ?? '0');

/** What a correction takes from one slice, and whether that slice is conditioned on what it was read with. */
interface Take {
  slice: number;
  amountNano: bigint;
  held: bigint;
  checked: boolean;
}

/**
 * Where `amountNano` is taken from: each slice's available credit, slice 0 first; undefined (refused)
 * when they have not that much together, unless `force`, which takes the rest from slice 0.
 */
function planDeduction(items: (Item | undefined)[], amountNano: bigint, force: boolean): Take[] | undefined {
  const takes: Take[] = [];
  let left = amountNano;
  items.forEach((item, slice) => {
    const available = availableOf(item);
    if (!item || left <= 0n || available <= 0n) return;
    // biome-ignore lint/complexity/useMathMinMax: bigints (Math.min takes numbers)
    const amount = available < left ? available : left;
    takes.push({ slice, amountNano: amount, held: BigInt(item.heldNano?.N ?? '0'), checked: true });
    left -= amount;
  });
  if (left === 0n) return takes;
  if (!force) return undefined;
  const first = takes[0];
  if (first?.slice === 0) {
    first.amountNano += left;
    first.checked = false;
  } else takes.unshift({ slice: 0, amountNano: left, held: 0n, checked: false });
  return takes;
}

export class Corrections extends StorePart {
  constructor(
    db: Db,
    private readonly slices: Slices,
    private readonly transfers: Transfers,
  ) {
    super(db);
  }

  /**
   * The entry and the deduction in one transaction, the entry conditioned on not existing (so a
   * reference is applied once). The deduction is taken from the slices' available credit (balance
   * minus held), slice 0 first; unless `force`, each slice it takes from is conditioned on still
   * having what it was read with: its balance covers what is taken plus what it held then, and it
   * holds no more now (DynamoDB's conditions have no arithmetic; a charge or a new hold meanwhile
   * makes it read again). Forced, what the slices have not is taken from slice 0, below zero. Credit
   * is not moved between slices first: moved credit may still be spent where it was by requests in
   * flight (core/store.ts, TRANSFER_DELAY_MS). The slices are evened out after, by scheduled transfers.
   */
  async remove(
    accountId: string,
    reference: string,
    amountNano: bigint,
    now: string,
    { force = false, audit }: { force?: boolean } & Audited = {},
  ): Promise<CorrectionOutcome> {
    const entryId = correctionEntryId(reference);
    // Looked up first: a reference applied before is 'already-applied', whatever the balance is now.
    if (await this.exists(accountId, entryId)) return 'already-applied';
    for (let attempt = 1; ; attempt++) {
      const head = await this.slices.head(accountId);
      if (!head) throw new AccountNotFoundError(accountId);
      const slices = slicesOf(head);
      const items = slices === 1 ? [head] : [head, ...(await this.slices.read(accountId, 1, slices))];
      const takes = planDeduction(items, amountNano, force);
      if (!takes) return 'refused';
      try {
        await this.wire.call('TransactWriteItems', {
          TransactItems: withAudit<object>(
            [
              {
                Put: {
                  TableName: this.tables.ledger,
                  Item: {
                    accountId: S(accountId),
                    entryId: S(entryId),
                    type: S('correction'),
                    reference: S(reference),
                    amountNanoUsd: N(amountNano),
                    createdAt: S(now),
                  },
                  ConditionExpression: 'attribute_not_exists(entryId)',
                },
              },
              ...takes.map((take) => ({
                Update: {
                  TableName: this.tables.accounts,
                  Key: { accountId: S(sliceKey(accountId, take.slice)) },
                  UpdateExpression: 'ADD creditBalance :amount',
                  ConditionExpression: take.checked
                    ? 'creditBalance >= :needed AND (attribute_not_exists(heldNano) OR heldNano <= :held)'
                    : 'attribute_exists(accountId)',
                  ExpressionAttributeValues: {
                    ':amount': N(-take.amountNano),
                    ...(take.checked
                      ? { ':needed': N(take.amountNano + take.held), ':held': N(take.held) }
                      : {}),
                  },
                },
              })),
              // Its audit entry (a refund, a dispute, an operator's correction), last: with it or not at all.
            ],
            audit,
            this.tables,
          ),
        });
        break;
      } catch (error) {
        const reasons = cancellationReasons(error);
        if (reasons?.[0]?.Code === 'ConditionalCheckFailed') return 'already-applied';
        if (audit && reasons?.at(-1)?.Code === 'ConditionalCheckFailed') throw error;
        // A slice changed since it was read (a charge, a hold), or a conflict: read them again.
        const changed = reasons?.some((reason) => reason.Code === 'ConditionalCheckFailed') === true;
        if (!reasons || (!changed && !isRetryableSettlementError(error)) || attempt >= MAX_ATTEMPTS)
          throw error;
        await sleep(retryWait(attempt));
      }
    }
    if (slicesOf(await this.slices.head(accountId)) > 1) await this.transfers.rebalance(accountId);
    return 'applied';
  }

  private async exists(accountId: string, entryId: string): Promise<boolean> {
    const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: this.tables.ledger,
      Key: { accountId: S(accountId), entryId: S(entryId) },
      ConsistentRead: true,
      ProjectionExpression: 'entryId',
    });
    return out.Item !== undefined;
  }

  /** The sum of the account's corrections: its own partition's `correction#` entries, one strongly consistent Query. */
  async total(accountId: string): Promise<bigint> {
    const items = await queryAll(this.wire, {
      TableName: this.tables.ledger,
      KeyConditionExpression: `accountId = :accountId AND ${sortKeyPrefix('entryId', PREFIX).condition}`,
      ExpressionAttributeValues: { ':accountId': S(accountId), ...sortKeyPrefix('entryId', PREFIX).values },
      ProjectionExpression: 'amountNanoUsd',
      ConsistentRead: true,
    });
    return items.reduce((sum, item) => sum + BigInt(item.amountNanoUsd?.N ?? '0'), 0n);
  }

  /**
   * A page of accounts: Scan calls of at most the accounts still wanted (Limit counts the items read,
   * slice items included, so a page never passes `limit`), from `after` on, until the page is full or
   * the table ends. `next` is the last key read (an account or a slice item id), DynamoDB's own
   * LastEvaluatedKey.
   */
  async listAccounts({ limit, after }: { limit: number; after?: string }): Promise<AccountPage> {
    const accounts: AccountRecord[] = [];
    let start: Item | undefined = after ? { accountId: S(after) } : undefined;
    while (accounts.length < limit) {
      const out: ScanCommandOutput = await this.wire.call<ScanCommandOutput>('Scan', {
        TableName: this.tables.accounts,
        Limit: limit - accounts.length,
        ProjectionExpression: 'accountId, #status, creditBalance, heldNano, createdAt, slices',
        ExpressionAttributeNames: { '#status': 'status' },
        ...(start ? { ExclusiveStartKey: start } : {}),
      });
      // Slice items (`<accountId>#<i>`) are parts of an account, not accounts.
      for (const item of out.Items ?? [])
        if (item.accountId?.S && !item.accountId.S.includes('#')) accounts.push(toAccount(item));
      start = out.LastEvaluatedKey;
      if (!start) return { accounts };
    }
    const next = start?.accountId?.S;
    return next ? { accounts, next } : { accounts };
  }
}
