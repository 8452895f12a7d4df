/**
 * The status command on an account split into slices: the account item and every slice carry the
 * status, and two commands at once end the same on all of them (slices.ts reads and moves credit).
 */
import type { GetItemCommandOutput, UpdateItemCommandOutput } from '@aws-sdk/client-dynamodb';
import type { AccountStatus } from '../../core/access.js';
import { AccountNotFoundError } from '../../core/store.js';
import { type Item, N, S, sliceKey, slicesOf, type TableNames } from './items.js';
import { retried } from './store-db.js';
import type { DynamoWire } from './wire.js';

/**
 * The status on the account item, then on every slice, each by its own write retried through
 * conflicts: under load a transaction over all of a busy account's slices would nearly never find
 * them all free at once. Not atomic, and need not be: the operator's command returns once every
 * slice carries the status (or a later command's), so every request that starts after it reads it
 * on whichever slice it draws. The slice count is read from the account item's own update, so a
 * slice a split created before it is included, and a split after it copies the new status.
 *
 * Two commands at once (a suspension and a reinstatement) write the same slices in any order, so
 * each command is numbered: the account item's update adds one to its `statusVersion` and returns
 * it, and a slice takes a command's status only while it carries an older number. Every slice then
 * ends with the status of the command that updated the account item last, as the account item does,
 * whatever the order of their writes; a slice write refused for its number is one a later command
 * made already, not a failure.
 *
 * With a cause (a dispute's reference), the account item's update is conditioned on the account being
 * active and the cause not among its `statusCauses` (a string set it adds it to), so a ban is never
 * lifted by it, however the two race, and a cause applied once is not applied again after an operator
 * reinstated the account (Stripe retries an event for days). False, and no slice written, when refused.
 */
export async function setSliceStatus(
  wire: DynamoWire,
  tables: TableNames,
  accountId: string,
  status: AccountStatus,
  now: string,
  cause?: string,
): Promise<boolean> {
  let head: Item | undefined;
  const once = cause
    ? {
        update: ', statusCauses :cause',
        condition: ' AND #status = :active AND NOT contains(statusCauses, :causeText)',
        values: { ':cause': { SS: [cause] }, ':causeText': S(cause), ':active': S('active') },
      }
    : { update: '', condition: '', values: {} };
  try {
    head = (
      await retried(() =>
        wire.call<UpdateItemCommandOutput>('UpdateItem', {
          TableName: tables.accounts,
          Key: { accountId: S(accountId) },
          UpdateExpression: `SET #status = :status, statusChangedAt = :now ADD statusVersion :one${once.update}`,
          ConditionExpression: `attribute_exists(accountId)${once.condition}`,
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: { ':status': S(status), ':now': S(now), ':one': N(1), ...once.values },
          ReturnValues: 'ALL_NEW',
        }),
      )
    ).Attributes;
  } catch (error) {
    if ((error as Error).name !== 'ConditionalCheckFailedException') throw error;
    if (!cause) throw new AccountNotFoundError(accountId);
    const exists = await wire.call<GetItemCommandOutput>('GetItem', {
      TableName: tables.accounts,
      Key: { accountId: S(accountId) },
      ConsistentRead: true,
      ProjectionExpression: 'accountId',
    });
    if (!exists.Item) throw new AccountNotFoundError(accountId);
    return false;
  }
  const version = head?.statusVersion?.N ?? '1';
  const slices = slicesOf(head);
  await Promise.all(
    Array.from({ length: slices - 1 }, async (_, i) => {
      try {
        await retried(() =>
          wire.call('UpdateItem', {
            TableName: tables.accounts,
            Key: { accountId: S(sliceKey(accountId, i + 1)) },
            UpdateExpression: 'SET #status = :status, statusVersion = :version',
            // The slice exists (a split writes its items and the account item's count in one
            // transaction, and slices are never removed): a failure is a number as high already, a
            // later command's (or this one's own write, sent again after its answer was lost).
            ConditionExpression:
              'attribute_exists(accountId) AND (attribute_not_exists(statusVersion) OR statusVersion < :version)',
            ExpressionAttributeNames: { '#status': 'status' },
            ExpressionAttributeValues: { ':status': S(status), ':version': { N: version } },
          }),
        );
      } catch (error) {
        if ((error as Error).name !== 'ConditionalCheckFailedException') throw error;
      }
    }),
  );
  return true;
}
