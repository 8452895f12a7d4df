/**
 * Where the reconciler keeps its place between runs: one item of the ledger table, in a partition no
 * account has (`_reconciler`: account ids are never written with a leading underscore by the service,
 * and every read of the ledger is a Query of one account's partition). One GetItem at the start of a
 * run and one PutItem after each page it finished.
 */
import type { GetItemCommandOutput } from '@aws-sdk/client-dynamodb';
import type { TableNames } from '../adapters/dynamodb/index.js';
import { type Item, S } from '../adapters/dynamodb/items.js';
import type { DynamoWire } from '../adapters/dynamodb/wire.js';
import type { Checkpoint, CheckpointStore } from './reconcile.js';

/** The checkpoint item's key in the ledger table. */
const CHECKPOINT_KEY = { accountId: '_reconciler', entryId: 'stripe-events' } as const;

export function ledgerCheckpoints(db: { wire: DynamoWire; tables: TableNames }): CheckpointStore {
  const Key = { accountId: S(CHECKPOINT_KEY.accountId), entryId: S(CHECKPOINT_KEY.entryId) };
  return {
    async load() {
      const out = await db.wire.call<GetItemCommandOutput>('GetItem', {
        TableName: db.tables.ledger,
        Key,
        ConsistentRead: true,
      });
      const text = (out.Item as Item | undefined)?.state?.S;
      return text ? (JSON.parse(text) as Checkpoint) : undefined;
    },
    async save(checkpoint) {
      await db.wire.call('PutItem', {
        TableName: db.tables.ledger,
        Item: { ...Key, state: S(JSON.stringify(checkpoint)), updatedAt: S(new Date().toISOString()) },
      });
    },
  };
}
