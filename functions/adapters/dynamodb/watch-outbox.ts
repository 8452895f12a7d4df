/**
 * The balance watch's outbox in the dashboard table (watch.ts lists its items): the messages queued,
 * claimed by a run that sends them, dead-lettered or deleted once sent; WatchItems builds on it.
 */
import type { QueryCommandInput, UpdateItemCommandOutput } from '@aws-sdk/client-dynamodb';
import type { DeadLetter, OutboxMessage } from '../../core/watch.js';
import { DashboardTablePart } from './dashboard.js';
import { type Item, N, S } from './items.js';
import { INDEX } from './schema.js';
import { cancellationReasons, queryAll } from './store-db.js';
import { str } from './watch-item.js';

/** A failed condition: of a single write, or of any item of a cancelled transaction. */
export const failedCondition = (error: unknown): boolean => {
  if ((error as { name?: string } | undefined)?.name === 'ConditionalCheckFailedException') return true;
  const reasons = cancellationReasons(error);
  return reasons?.some((r) => r.Code === 'ConditionalCheckFailed') === true;
};

function toMessage(item: Item): OutboxMessage {
  return {
    id: String(item.id?.S),
    accountId: str(item, 'accountId') ?? '',
    to: str(item, 'to') ?? '',
    subject: str(item, 'subject') ?? '',
    text: str(item, 'text') ?? '',
    createdAt: str(item, 'createdAt') ?? '',
    attempts: Number(item.sendAttempts?.N ?? 0),
  };
}

const oldestFirst = (a: OutboxMessage, b: OutboxMessage) => a.createdAt.localeCompare(b.createdAt);

export class WatchOutbox extends DashboardTablePart {
  /** An update of one item of the table by its id; false when its condition failed. */
  protected async updateItem(
    id: string,
    update: string,
    values: Item,
    condition?: string,
    names: Record<string, string> = {},
  ): Promise<boolean> {
    try {
      await this.wire.call('UpdateItem', {
        TableName: this.name(),
        Key: { id: S(id) },
        UpdateExpression: update,
        ExpressionAttributeValues: values,
        ...(Object.keys(names).length > 0 ? { ExpressionAttributeNames: names } : {}),
        ...(condition ? { ConditionExpression: condition } : {}),
      });
      return true;
    } catch (error) {
      if (failedCondition(error)) return false;
      throw error;
    }
  }

  protected queryList(list: 'watch' | 'outbox' | 'dead-letter'): Promise<Item[]> {
    const input: QueryCommandInput = {
      TableName: this.name(),
      IndexName: INDEX.watchList,
      KeyConditionExpression: 'watchList = :list',
      ExpressionAttributeValues: { ':list': S(list) },
    };
    return queryAll(this.wire, input);
  }

  async pendingMessages(): Promise<OutboxMessage[]> {
    return (await this.queryList('outbox')).map(toMessage).sort(oldestFirst);
  }

  async claimMessage(id: string, untilMs: number, nowMs: number): Promise<number | undefined> {
    try {
      const out = await this.wire.call<UpdateItemCommandOutput>('UpdateItem', {
        TableName: this.name(),
        Key: { id: S(id) },
        UpdateExpression: 'SET claimedUntil = :until ADD sendAttempts :one',
        // Still in the outbox: the index a run listed it from may lag a dead-lettering.
        ConditionExpression:
          'watchList = :outbox AND (attribute_not_exists(claimedUntil) OR claimedUntil < :now)',
        ExpressionAttributeValues: {
          ':until': N(untilMs),
          ':now': N(nowMs),
          ':one': N(1),
          ':outbox': S('outbox'),
        },
        ReturnValues: 'UPDATED_NEW',
      });
      return Number(out.Attributes?.sendAttempts?.N ?? 1);
    } catch (error) {
      if (failedCondition(error)) return undefined;
      throw error;
    }
  }

  deadLetter(id: string, reason: string, now: string): Promise<boolean> {
    return this.updateItem(
      id,
      'SET watchList = :dead, deadReason = :reason, deadAt = :now REMOVE claimedUntil',
      {
        ':dead': S('dead-letter'),
        ':reason': S(reason.slice(0, 1_000)),
        ':now': S(now),
        ':outbox': S('outbox'),
      },
      'watchList = :outbox',
    );
  }

  async deadLetters(): Promise<DeadLetter[]> {
    return (await this.queryList('dead-letter'))
      .map((item) => ({
        ...toMessage(item),
        reason: str(item, 'deadReason') ?? '',
        deadAt: str(item, 'deadAt') ?? '',
      }))
      .sort(oldestFirst);
  }

  async deleteMessage(id: string): Promise<void> {
    await this.wire.call('DeleteItem', { TableName: this.name(), Key: { id: S(id) } });
  }
}
