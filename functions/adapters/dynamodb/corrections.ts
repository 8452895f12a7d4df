/**
 * What only the operator does beside top-ups: credit taken back (a refund by hand, a correction),
 * once per reference, and the accounts read a page at a time. Neither is ever on a request's path.
 *
 * A correction is a ledger entry of slice 0's partition, as a top-up is: `correction#<reference>`,
 * `type` correction, `reference`, and `amountNanoUsd` (N, positive; the type gives the sign, as
 * items.ts says of every entry), written in one transaction with its deduction from the account item.
 */
import {
  GetItemCommand,
  ScanCommand,
  type ScanCommandOutput,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import {
  AccountNotFoundError,
  type AccountPage,
  type AccountRecord,
  type CorrectionOutcome,
  correctionEntryId,
} from '../../core/store.js';
import { type Item, N, S, slicesOf, toAccount } from './items.js';
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
} from './store-db.js';

const PREFIX = correctionEntryId('');

/** A slice item's available credit: its balance minus what it holds. */
const availableOf = (item: Item | undefined): bigint =>
  BigInt(item?.creditBalance?.N ?? '0') - BigInt(item?.heldNano?.N ?? '0');

export class Corrections extends StorePart {
  constructor(
    db: Db,
    private readonly slices: Slices,
  ) {
    super(db);
  }

  /**
   * The entry and the deduction in one transaction, the entry conditioned on not existing (so a
   * reference is applied once) and, unless `force`, the account item on still having the credit it
   * was read with: its balance covers the amount plus what it held then, and it holds no more now
   * (DynamoDB's conditions have no arithmetic; a charge or a new hold meanwhile makes it read again).
   * A split account's credit is spread over its slices: what slice 0 lacks is moved to it from the
   * others first, and the slices are evened out again after.
   */
  async remove(
    accountId: string,
    reference: string,
    amountNano: bigint,
    now: string,
    { force = false }: { force?: boolean } = {},
  ): Promise<CorrectionOutcome> {
    const entryId = correctionEntryId(reference);
    // Looked up first: a reference applied before is 'already-applied', whatever the balance is now.
    if (await this.exists(accountId, entryId)) return 'already-applied';
    let slices = 1;
    let outcome: CorrectionOutcome = 'refused';
    for (let attempt = 1; ; attempt++) {
      let head = await this.slices.head(accountId);
      if (!head) throw new AccountNotFoundError(accountId);
      slices = slicesOf(head);
      if (!force && slices > 1 && availableOf(head) < amountNano) {
        const account = await this.slices.account(accountId);
        if (!account || account.balanceNano - account.heldNano < amountNano) return 'refused';
        await this.gather(accountId, slices, amountNano);
        head = (await this.slices.head(accountId)) ?? head;
      }
      // Spent meanwhile (on a split account, what could be moved to slice 0 was not enough).
      if (!force && availableOf(head) < amountNano) break;
      try {
        await this.client.send(
          new TransactWriteItemsCommand(
            this.input(accountId, entryId, reference, amountNano, now, head, force),
          ),
        );
        outcome = 'applied';
        break;
      } catch (error) {
        const reasons = cancellationReasons(error);
        const [ledger, account] = reasons ?? [];
        if (ledger?.Code === 'ConditionalCheckFailed') return 'already-applied';
        // The account item changed since it was read (a charge, a hold), or a conflict: read it again.
        const changed = account?.Code === 'ConditionalCheckFailed';
        if (!reasons || (!changed && !isRetryableSettlementError(error)) || attempt >= MAX_ATTEMPTS)
          throw error;
        await sleep(retryWait(attempt));
      }
    }
    // Even again: what was moved to slice 0, and what a forced correction took below zero there.
    if (slices > 1) await this.slices.rebalance(accountId);
    return outcome;
  }

  private input(
    accountId: string,
    entryId: string,
    reference: string,
    amountNano: bigint,
    now: string,
    head: Item,
    force: boolean,
  ) {
    const held = BigInt(head.heldNano?.N ?? '0');
    return {
      TransactItems: [
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
        {
          Update: {
            TableName: this.tables.accounts,
            Key: { accountId: S(accountId) },
            UpdateExpression: 'ADD creditBalance :amount',
            ConditionExpression: force
              ? 'attribute_exists(accountId)'
              : 'creditBalance >= :needed AND (attribute_not_exists(heldNano) OR heldNano <= :held)',
            ExpressionAttributeValues: {
              ':amount': N(-amountNano),
              ...(force ? {} : { ':needed': N(amountNano + held), ':held': N(held) }),
            },
          },
        },
      ],
    };
  }

  /** Moves credit from the other slices to slice 0 until it has `amountNano` available, or they have none. */
  private async gather(accountId: string, slices: number, amountNano: bigint): Promise<void> {
    const items = await this.slices.read(accountId, 0, slices);
    let lacking = amountNano - availableOf(items[0]);
    for (let slice = 1; slice < slices && lacking > 0n; slice++) {
      const spare = availableOf(items[slice]);
      if (spare <= 0n) continue;
      // biome-ignore lint/complexity/useMathMinMax: bigints (Math.min takes numbers)
      const amount = spare < lacking ? spare : lacking;
      if (await this.slices.transfer(accountId, slice, 0, amount)) lacking -= amount;
    }
  }

  private async exists(accountId: string, entryId: string): Promise<boolean> {
    const out = await this.client.send(
      new GetItemCommand({
        TableName: this.tables.ledger,
        Key: { accountId: S(accountId), entryId: S(entryId) },
        ConsistentRead: true,
        ProjectionExpression: 'entryId',
      }),
    );
    return out.Item !== undefined;
  }

  /** The sum of the account's corrections: its own partition's `correction#` entries, one strongly consistent Query. */
  async total(accountId: string): Promise<bigint> {
    const items = await queryAll(this.client, {
      TableName: this.tables.ledger,
      KeyConditionExpression: 'accountId = :accountId AND begins_with(entryId, :correction)',
      ExpressionAttributeValues: { ':accountId': S(accountId), ':correction': S(PREFIX) },
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
      const out: ScanCommandOutput = await this.client.send(
        new ScanCommand({
          TableName: this.tables.accounts,
          Limit: limit - accounts.length,
          ProjectionExpression: 'accountId, #status, creditBalance, heldNano, createdAt, slices',
          ExpressionAttributeNames: { '#status': 'status' },
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
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
