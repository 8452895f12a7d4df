/**
 * Credit moved between the slices of an account (core/store.ts, Transfer): scheduled by marking it on
 * the source, moved by the sweeper once due (TRANSFER_DELAY_MS, when every request admitted on the
 * source before the mark has ended), as much as the source still has of it. A top-up's spread over
 * the slices and a split's rebalance are made of them.
 */
import { randomUUID } from 'node:crypto';
import type { GetItemCommandOutput } from '@aws-sdk/client-dynamodb';
import { TRANSFER_DELAY_MS, type Transfer, type TransferOutcome } from '../../core/store.js';
import { type Item, N, S, sliceKey, slicesOf, TRANSFER_PREFIX, toTransfer, transferItem } from './items.js';
import type { Slices } from './slices.js';
import {
  cancellationReasons,
  type Db,
  MAX_ATTEMPTS,
  queryAll,
  retryWait,
  StorePart,
  scanAll,
  sleep,
} from './store-db.js';

export class Transfers extends StorePart {
  constructor(
    db: Db,
    private readonly slices: Slices,
  ) {
    super(db);
  }

  /** One slice, read strongly consistently in one GetItem; undefined if it is not there. */
  private async slice(accountId: string, slice: number): Promise<Item | undefined> {
    const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: this.tables.accounts,
      Key: { accountId: S(sliceKey(accountId, slice)) },
      ConsistentRead: true,
    });
    return out.Item;
  }

  /**
   * Schedules `amountNano` to move from slice `from` to slice `to` (core/store.ts, Transfer: it moves
   * after TRANSFER_DELAY_MS, once every request admitted on the source before now has ended): one
   * transaction marks it on the source (`outgoingNano`), only while the source has that much
   * available and not already marked, notes it on the destination (`incomingNano`), and writes the
   * transfer item the sweeper moves it by. DynamoDB's conditions have no arithmetic, so the source is
   * read first and the condition is that its balance still covers the amount plus what it held and
   * marked then, and that it holds and marks no more now (a settlement lowers both; a new hold or
   * mark makes it read again). The account's total is unchanged, so no ledger entry. Retried through
   * conflicts; the transfer scheduled, or undefined when the source has not that much available.
   */
  async scheduleTransfer(
    accountId: string,
    from: number,
    to: number,
    amountNano: bigint,
    now = Date.now(),
  ): Promise<Transfer | undefined> {
    const transfer: Transfer = {
      accountId,
      transferId: `${TRANSFER_PREFIX}${to}#${randomUUID()}`,
      from,
      to,
      amountNano,
      dueAt: now + TRANSFER_DELAY_MS,
      createdAt: new Date(now).toISOString(),
    };
    for (let attempt = 1; ; attempt++) {
      const source = await this.slice(accountId, from);
      if (!source) return undefined;
      const held = BigInt(source.heldNano?.N ?? '0');
      const outgoing = BigInt(source.outgoingNano?.N ?? '0');
      if (BigInt(source.creditBalance?.N ?? '0') - held - outgoing < amountNano) return undefined;
      try {
        await this.wire.call('TransactWriteItems', {
          TransactItems: [
            {
              Update: {
                TableName: this.tables.accounts,
                Key: { accountId: S(sliceKey(accountId, from)) },
                UpdateExpression: 'ADD outgoingNano :amount',
                ConditionExpression:
                  'creditBalance >= :needed AND (attribute_not_exists(heldNano) OR heldNano <= :held) AND ' +
                  '(attribute_not_exists(outgoingNano) OR outgoingNano <= :outgoing)',
                ExpressionAttributeValues: {
                  ':amount': N(amountNano),
                  ':needed': N(amountNano + held + outgoing),
                  ':held': N(held),
                  ':outgoing': N(outgoing),
                },
              },
            },
            {
              Update: {
                TableName: this.tables.accounts,
                Key: { accountId: S(sliceKey(accountId, to)) },
                UpdateExpression: 'ADD incomingNano :amount',
                ConditionExpression: 'attribute_exists(accountId)',
                ExpressionAttributeValues: { ':amount': N(amountNano) },
              },
            },
            {
              Put: {
                TableName: this.tables.holds,
                Item: transferItem(transfer),
                ConditionExpression: 'attribute_not_exists(holdId)',
              },
            },
          ],
        });
        return transfer;
      } catch (error) {
        const reasons = cancellationReasons(error);
        if (reasons?.[1]?.Code === 'ConditionalCheckFailed') return undefined;
        // The source changed since it was read (or a conflict, or throttling): read it again.
        if (!reasons || attempt >= MAX_ATTEMPTS) throw error;
        await sleep(retryWait(attempt));
      }
    }
  }

  /**
   * Moves a due transfer (core/store.ts, Store.completeTransfer): as much of its amount as the source
   * has available besides it (balance minus held minus its other outgoing credit), with the marks
   * cleared and the transfer item deleted, in one transaction conditioned as a scheduling is (the
   * source's balance still covers what is moved plus what it held and marked when read, and it holds
   * and marks no more now) and on the item still being there, so a transfer moves once.
   */
  async completeTransfer(transfer: Transfer, now: number): Promise<TransferOutcome> {
    if (transfer.dueAt > now) return 'not-due';
    const { accountId, from, to, amountNano } = transfer;
    for (let attempt = 1; ; attempt++) {
      const source = await this.slice(accountId, from);
      if (!source) return 'gone';
      const held = BigInt(source.heldNano?.N ?? '0');
      const outgoing = BigInt(source.outgoingNano?.N ?? '0');
      const others = outgoing > amountNano ? outgoing - amountNano : 0n;
      const available = BigInt(source.creditBalance?.N ?? '0') - held - others;
      const moved = available <= 0n ? 0n : available < amountNano ? available : amountNano;
      try {
        await this.wire.call('TransactWriteItems', {
          TransactItems: [
            {
              Update: {
                TableName: this.tables.accounts,
                Key: { accountId: S(sliceKey(accountId, from)) },
                UpdateExpression: 'ADD creditBalance :out, watchMargin :out, outgoingNano :unmark',
                // Nothing moved (the source spent it): only the mark is cleared, whatever its balance.
                ConditionExpression:
                  moved > 0n
                    ? 'creditBalance >= :needed AND (attribute_not_exists(heldNano) OR heldNano <= :held) AND ' +
                      'outgoingNano <= :outgoing'
                    : 'outgoingNano <= :outgoing',
                ExpressionAttributeValues: {
                  ':out': N(-moved),
                  ':unmark': N(-amountNano),
                  ':outgoing': N(outgoing),
                  ...(moved > 0n ? { ':needed': N(moved + held + others), ':held': N(held) } : {}),
                },
              },
            },
            {
              Update: {
                TableName: this.tables.accounts,
                Key: { accountId: S(sliceKey(accountId, to)) },
                UpdateExpression: 'ADD creditBalance :in, watchMargin :in, incomingNano :unmark',
                ConditionExpression: 'attribute_exists(accountId)',
                ExpressionAttributeValues: { ':in': N(moved), ':unmark': N(-amountNano) },
              },
            },
            {
              Delete: {
                TableName: this.tables.holds,
                Key: { accountId: S(sliceKey(accountId, from)), holdId: S(transfer.transferId) },
                ConditionExpression: 'attribute_exists(holdId)',
              },
            },
          ],
        });
        return { moved };
      } catch (error) {
        const reasons = cancellationReasons(error);
        // Moved already (a sweep before this one, whose answer may have been lost).
        if (reasons?.[2]?.Code === 'ConditionalCheckFailed') return 'gone';
        if (!reasons || attempt >= MAX_ATTEMPTS) throw error;
        await sleep(retryWait(attempt));
      }
    }
  }

  /** The transfers still to move, of one account (its slices' partitions) or of every account (a scan), soonest due first. */
  async listTransfers(accountId?: string): Promise<Transfer[]> {
    let items: Item[];
    if (accountId) {
      const pages = await Promise.all(
        Array.from({ length: slicesOf(await this.slices.head(accountId)) }, (_, slice) =>
          queryAll(this.wire, {
            TableName: this.tables.holds,
            KeyConditionExpression: 'accountId = :accountId AND begins_with(holdId, :transfer)',
            ExpressionAttributeValues: {
              ':accountId': S(sliceKey(accountId, slice)),
              ':transfer': S(TRANSFER_PREFIX),
            },
            ConsistentRead: true,
          }),
        ),
      );
      items = pages.flat();
    } else {
      items = await scanAll(this.wire, {
        TableName: this.tables.holds,
        FilterExpression: 'begins_with(holdId, :transfer)',
        ExpressionAttributeValues: { ':transfer': S(TRANSFER_PREFIX) },
        ConsistentRead: true,
      });
    }
    return items.map(toTransfer).sort((a, b) => a.dueAt - b.dueAt);
  }

  /**
   * Spreads an amount just added to slice 0 (a top-up) evenly over the account's other slices, one
   * scheduled transfer after another (each is a transaction on slice 0: at once they would only cancel
   * each other). A transfer refused because slice 0 no longer has its share (spent meanwhile) leaves
   * it there: the total is exact either way, and a request that draws a dry slice is admitted on one
   * that has credit. Any other failure is thrown, so that a fault is seen rather than left uneven.
   */
  async spread(accountId: string, slices: number, amountNano: bigint): Promise<void> {
    const share = amountNano / BigInt(slices);
    if (slices === 1 || share === 0n) return;
    for (let slice = 1; slice < slices; slice++) await this.scheduleTransfer(accountId, 0, slice, share);
  }

  /**
   * Evens out the account's slices: each slice's credit as it will be once what is on its way has
   * moved (balance minus held, minus its outgoing, plus its incoming) is brought to the mean by
   * transfers scheduled from the richest, each conditioned on the source still having it available.
   * Requests keep running meanwhile; what they spend meanwhile makes the result uneven, never wrong.
   */
  async rebalance(accountId: string): Promise<void> {
    const head = await this.slices.head(accountId);
    const slices = slicesOf(head);
    if (slices === 1) return;
    const items = await this.slices.read(accountId, 0, slices);
    const attr = (item: Item | undefined, name: string) => BigInt(item?.[name]?.N ?? '0');
    // What each slice can still send (available, not marked) and what it will have once transfers land.
    const spare = items.map(
      (item) => attr(item, 'creditBalance') - attr(item, 'heldNano') - attr(item, 'outgoingNano'),
    );
    const projected = items.map((item, slice) => (spare[slice] ?? 0n) + attr(item, 'incomingNano'));
    const total = projected.reduce((sum, p) => sum + (p > 0n ? p : 0n), 0n);
    const mean = total / BigInt(slices);
    for (let poor = 0; poor < slices; poor++) {
      let lacking = mean - (projected[poor] ?? 0n);
      while (lacking > 0n) {
        let rich = 0;
        projected.forEach((p, i) => {
          if (p > (projected[rich] ?? 0n)) rich = i;
        });
        const over = (projected[rich] ?? 0n) - mean;
        const sendable = spare[rich] ?? 0n;
        let amount = over < lacking ? over : lacking;
        if (sendable < amount) amount = sendable;
        if (rich === poor || amount <= 0n) break;
        if (!(await this.scheduleTransfer(accountId, rich, poor, amount))) break;
        projected[rich] = (projected[rich] ?? 0n) - amount;
        spare[rich] = (spare[rich] ?? 0n) - amount;
        projected[poor] = (projected[poor] ?? 0n) + amount;
        lacking -= amount;
      }
    }
  }
}
