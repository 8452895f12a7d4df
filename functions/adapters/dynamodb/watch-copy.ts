/**
 * The watch's levels copied onto the account item and each slice item of the accounts table
 * (functions/core/watch-levels.ts says what each attribute is and why): written by the settings'
 * writers (watch.ts setAlert, setAutoTopUp) after the watch item, and by a split onto its new slices
 * (watchOfHead below). Each item's copy is one UpdateItem that sets `watchMargin` from the item's own
 * balance in the same write (`creditBalance - watchNano`), so no balance write between a read and the
 * copy is lost; a copy older than the item's (`watchAt`) is dropped, so two changes at once leave the
 * later one.
 */
import type { GetItemCommandOutput } from '@aws-sdk/client-dynamodb';
import { topLevel, type WatchLevels } from '../../core/watch-levels.js';
import { type Item, N, S, sliceKey, slicesOf } from './items.js';
import type { Db } from './store-db.js';

/** The copy's attributes on an item, their values by name (none: the account has no watch). */
function copyOf(levels: WatchLevels): Record<string, bigint> {
  const level = topLevel(levels);
  if (level === undefined) return {};
  return {
    watchNano: level,
    ...(levels.alertNano !== undefined ? { watchAlertNano: levels.alertNano } : {}),
    ...(levels.topUpNano !== undefined ? { watchTopUpNano: levels.topUpNano } : {}),
  };
}

const COPIED = ['watchNano', 'watchAlertNano', 'watchTopUpNano'] as const;

/** Copies `levels` onto every item of the account's balance (a missing account: nothing to copy). */
export async function copyWatchLevels(
  db: Pick<Db, 'wire' | 'tables'>,
  accountId: string,
  levels: WatchLevels,
  now: string,
): Promise<void> {
  const out = await db.wire.call<GetItemCommandOutput>('GetItem', {
    TableName: db.tables.accounts,
    Key: { accountId: S(accountId) },
    ProjectionExpression: 'accountId, slices',
    ConsistentRead: true,
  });
  if (!out.Item) return;
  const copy = copyOf(levels);
  const sets = ['watchAt = :now'];
  const values: Item = { ':now': S(now) };
  for (const [name, value] of Object.entries(copy)) {
    sets.push(`${name} = :${name}`);
    values[`:${name}`] = N(value);
  }
  const removed: string[] = COPIED.filter((name) => copy[name] === undefined);
  if (copy.watchNano !== undefined) {
    sets.push('watchMargin = if_not_exists(creditBalance, :zero) - :watchNano');
    values[':zero'] = N(0);
  } else removed.push('watchMargin');
  const update = `SET ${sets.join(', ')}${removed.length > 0 ? ` REMOVE ${removed.join(', ')}` : ''}`;
  const slices = slicesOf(out.Item as Item);
  await Promise.all(
    Array.from({ length: slices }, async (_, slice) => {
      try {
        await db.wire.call('UpdateItem', {
          TableName: db.tables.accounts,
          Key: { accountId: S(sliceKey(accountId, slice)) },
          UpdateExpression: update,
          ConditionExpression:
            'attribute_exists(accountId) AND (attribute_not_exists(watchAt) OR watchAt <= :now)',
          ExpressionAttributeValues: values,
        });
      } catch (error) {
        // An older copy than the item's, or no such slice: nothing to write.
        if ((error as { name?: string }).name !== 'ConditionalCheckFailedException') throw error;
      }
    }),
  );
}

/** A new slice item's copy, from its account item as a split read it: its margin, the slice's 0 less the level. */
export function watchOfHead(head: Item): Item {
  if (head.watchNano?.N === undefined) return {};
  const copy: Item = { watchMargin: N(-BigInt(head.watchNano.N)) };
  for (const name of [...COPIED, 'watchAt'] as const) {
    const value = head[name];
    if (value) copy[name] = value;
  }
  return copy;
}
