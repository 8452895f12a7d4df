/**
 * Which generations already have a ledger entry: one eventually consistent BatchGetItem per 100
 * (DynamoDB's limit), of the key the settlement writes (the slice's partition, the generation id).
 * Eventually consistent costs half a read unit per entry (an entry is well under 4 KB) and reads no
 * account item: the account items are the hot ones under load, and nearly every generation the log
 * delivers was settled by its function seconds before. An entry written less than a second ago may
 * be missed; the settlement that follows is conditioned on the entry, so that costs one refused write,
 * never a second charge.
 * https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchGetItem.html
 */
import {
  BatchGetItemCommand,
  type BatchGetItemCommandOutput,
  type KeysAndAttributes,
} from '@aws-sdk/client-dynamodb';
import type { DynamoStore } from '../adapters/dynamodb/index.js';
import { S, sliceKey } from '../adapters/dynamodb/items.js';
import type { ChargeEntry } from '../core/store.js';

const BATCH = 100;
/** Keys DynamoDB left unprocessed (throttling) are asked again this many times, then it throws. */
const ATTEMPTS = 5;

export function ledgerReader(store: Pick<DynamoStore, 'client' | 'tables'>) {
  return async (entries: readonly ChargeEntry[]): Promise<Set<string>> => {
    const found = new Set<string>();
    for (let at = 0; at < entries.length; at += BATCH) {
      let request: KeysAndAttributes | undefined = {
        Keys: entries.slice(at, at + BATCH).map((entry) => ({
          accountId: S(sliceKey(entry.accountId, entry.slice ?? 0)),
          entryId: S(entry.generationId),
        })),
        ProjectionExpression: 'entryId',
        ConsistentRead: false,
      };
      for (let attempt = 1; request?.Keys?.length; attempt++) {
        if (attempt > ATTEMPTS) throw new Error('ledger entries left unread by BatchGetItem');
        if (attempt > 1) await new Promise((resolve) => setTimeout(resolve, 50 * 2 ** attempt));
        const out: BatchGetItemCommandOutput = await store.client.send(
          new BatchGetItemCommand({ RequestItems: { [store.tables.ledger]: request } }),
        );
        for (const item of out.Responses?.[store.tables.ledger] ?? [])
          if (item.entryId?.S) found.add(item.entryId.S);
        request = out.UnprocessedKeys?.[store.tables.ledger];
      }
    }
    return found;
  };
}
