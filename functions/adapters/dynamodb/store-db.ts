/**
 * What the store's parts share: the tables, the direct calls, and how writes are retried. Every call
 * goes through the wire (wire.ts); nothing here imports the SDK's runtime, so the function bundles
 * carry none of it (docs/performance.md). `client` is the SDK client a caller outside the functions
 * handed the store (the CLI, the local stack, tests), for what is not on the wire; a function's store
 * has none (client.ts getStore).
 */
import { hash } from 'node:crypto';
import type {
  BatchGetItemCommandOutput,
  DynamoDBClient,
  QueryCommandInput,
  QueryCommandOutput,
  ScanCommandInput,
  ScanCommandOutput,
} from '@aws-sdk/client-dynamodb';
import type { Item, TableNames } from './items.js';
import { dynamoTimeouts } from './timeouts.js';
import { type CancellationReason, DynamoWire } from './wire.js';

export interface Db {
  client: DynamoDBClient;
  tables: TableNames;
  /** Every call of the store, without the SDK client's middleware stack (wire.ts). */
  wire: DynamoWire;
}

/** A part of the store (accounts and keys, the ledger, holds, slices): the tables and direct calls it uses. */
export abstract class StorePart {
  protected readonly client: DynamoDBClient;
  protected readonly tables: TableNames;
  protected readonly wire: DynamoWire;

  constructor(db: Db) {
    this.client = db.client;
    this.tables = db.tables;
    this.wire = db.wire;
  }

  /**
   * The items of `table` under `keys` that exist, in one BatchGetItem (at most 100 keys) and again
   * for what DynamoDB leaves unprocessed (throttling), up to `attempts` calls; with more than one
   * attempt, keys still unprocessed after the last throw, with one, they are simply left out.
   */
  protected async batchGet(
    table: string,
    keys: Item[],
    options: { consistent: boolean; attempts: number; projection?: string },
  ): Promise<Item[]> {
    const found: Item[] = [];
    let left = keys;
    for (let attempt = 0; left.length > 0 && attempt < options.attempts; attempt++) {
      if (attempt > 0) await sleep(20 * 2 ** attempt);
      const out = await this.wire.call<BatchGetItemCommandOutput>('BatchGetItem', {
        RequestItems: {
          [table]: {
            Keys: left,
            ConsistentRead: options.consistent,
            ...(options.projection ? { ProjectionExpression: options.projection } : {}),
          },
        },
      });
      found.push(...(out.Responses?.[table] ?? []));
      left = (out.UnprocessedKeys?.[table]?.Keys ?? []) as Item[];
    }
    if (left.length > 0 && options.attempts > 1)
      throw new Error(`BatchGetItem left keys unprocessed after ${options.attempts} attempts`);
    return found;
  }
}

/** The wires of SDK clients handed to queryAll or scanAll (their settings are the client's: connection.ts). */
const wiresOfClients = new WeakMap<DynamoDBClient, DynamoWire>();
const wireOf = (via: DynamoWire | DynamoDBClient): DynamoWire => {
  if (via instanceof DynamoWire) return via;
  const known = wiresOfClients.get(via);
  if (known) return known;
  const wire = new DynamoWire(via, dynamoTimeouts());
  wiresOfClients.set(via, wire);
  return wire;
};

/**
 * Every item a query matches, a page at a time (LastEvaluatedKey to ExclusiveStartKey, as the SDK's
 * paginator went), through the wire (or that of an SDK client's settings).
 */
export async function queryAll(via: DynamoWire | DynamoDBClient, input: QueryCommandInput): Promise<Item[]> {
  const items: Item[] = [];
  for await (const page of pages<QueryCommandOutput>(wireOf(via), 'Query', input))
    items.push(...(page.Items ?? []));
  return items;
}

/** Every item a scan returns, a page at a time, as queryAll. */
export async function scanAll(via: DynamoWire | DynamoDBClient, input: ScanCommandInput): Promise<Item[]> {
  const items: Item[] = [];
  for await (const page of pages<ScanCommandOutput>(wireOf(via), 'Scan', input))
    items.push(...(page.Items ?? []));
  return items;
}

/** A query's or a scan's pages, each asked for when the one before has been taken. */
export async function* pages<Page extends { LastEvaluatedKey?: Item | undefined }>(
  wire: DynamoWire,
  operation: 'Query' | 'Scan',
  input: QueryCommandInput | ScanCommandInput,
): AsyncGenerator<Page> {
  let start: Item | undefined = input.ExclusiveStartKey;
  do {
    const page: Page = await wire.call<Page>(
      operation,
      start ? { ...input, ExclusiveStartKey: start } : input,
    );
    yield page;
    start = page.LastEvaluatedKey;
  } while (start);
}

/**
 * The reasons of a cancelled transaction: DynamoDB's reason for each of its items, as the direct call
 * (wire.ts) names them, or as an SDK client's TransactionCanceledException does (`CancellationReasons`).
 */
export function cancellationReasons(error: unknown): CancellationReason[] | undefined {
  if (!(error instanceof Error) || error.name !== 'TransactionCanceledException') return undefined;
  const named = error as {
    cancellationReasons?: CancellationReason[];
    CancellationReasons?: CancellationReason[];
  };
  return named.cancellationReasons ?? named.CancellationReasons ?? [];
}

/** Conflicts, throttling and lost responses: safe to send again because the write is idempotent. */
export function isRetryableSettlementError(error: unknown): boolean {
  const reasons = cancellationReasons(error);
  if (reasons) {
    return reasons.some((reason) =>
      ['TransactionConflict', 'ThrottlingError', 'ProvisionedThroughputExceeded'].includes(reason.Code ?? ''),
    );
  }
  const name = (error as { name?: string } | undefined)?.name ?? '';
  return [
    'TransactionConflictException',
    'TransactionInProgressException',
    'ThrottlingException',
    'ProvisionedThroughputExceededException',
    'RequestLimitExceeded',
    'InternalServerError',
    'TimeoutError',
    'RequestTimeout',
  ].includes(name);
}

/** A transaction cancelled because another one held one of its items at that moment. */
export function isConflict(error: unknown): boolean {
  const reasons = cancellationReasons(error);
  if (reasons) return reasons.some((reason) => reason.Code === 'TransactionConflict');
  return (error as { name?: string } | undefined)?.name === 'TransactionConflictException';
}

/**
 * A settlement is sent again after a conflict, throttling or a lost answer for as long as its deadline
 * allows, waiting a random time up to an exponentially growing ceiling ("full jitter", as AWS's SDKs
 * retry): 20 ms, 40 ms ... capped at 640 ms, so that transactions which met on one item spread out
 * over a window as wide as the crowd that met there, rather than meeting again. The deadline (the
 * invocation's own) is the bound, and what is still unwritten then is deferred
 * (store.deferSettlement), not lost; 40 attempts bound a caller without one (the sweeper, the CLI).
 */
export const MAX_ATTEMPTS = 40;

export function retryWait(attempt: number): number {
  return Math.random() * Math.min(640, 10 * 2 ** attempt);
}

/**
 * Sends a write again while `retryable` says so (by default: conflicts, throttling, lost answers, for
 * a write that is idempotent as it is), with full jitter, at most MAX_ATTEMPTS times.
 */
export async function retried<T>(
  write: () => Promise<T>,
  retryable: (error: unknown) => boolean = isRetryableSettlementError,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (error) {
      if (!retryable(error) || attempt >= MAX_ATTEMPTS) throw error;
      await sleep(retryWait(attempt));
    }
  }
}

/**
 * A ClientRequestToken (at most 36 characters) naming one kind of write of one thing: a generation's
 * hold, one call's settlement of a generation (ledger.ts).
 */
export function requestToken(kind: string, id: string): string {
  return hash('sha256', `${kind}:${id}`, 'base64url').slice(0, 36);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * A key condition on the entries whose sort key starts with `prefix`, written as a BETWEEN range (the
 * prefix up to the prefix and the highest code point) rather than begins_with: the same on DynamoDB,
 * and on DynamoDB Local, whose begins_with walks the whole partition (an account's million charges
 * took Billing's credit history from 4 ms to 242 ms there, bench/activity.ts).
 */
export function sortKeyPrefix(name: string, prefix: string) {
  return {
    condition: `${name} BETWEEN :prefixLow AND :prefixHigh`,
    values: { ':prefixLow': { S: prefix }, ':prefixHigh': { S: `${prefix}\u{10FFFF}` } },
  };
}
