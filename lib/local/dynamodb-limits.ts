/**
 * DynamoDB's limits in front of DynamoDB Local: an HTTP proxy on a loopback port that reads each call
 * of DynamoDB's JSON protocol (its X-Amz-Target and body) and answers as DynamoDB does under load.
 * DynamoDB Local itself has no throughput limits and never cancels a transaction for a conflict.
 *
 * - Throughput: every partition key (table + partition-key value, each its own partition: DynamoDB's
 *   best case) has token buckets of 1,000 write units and 3,000 read units a second, "the maximum
 *   throughput of a single partition" ("Partitions and data distribution",
 *   https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.Partitions.html;
 *   "Best practices for designing and using partition keys effectively", bp-partition-key-design.html).
 *   Units come from item sizes (dynamodb-units.ts). A call is admitted when each partition it touches
 *   has the units it is estimated to cost, then charged what DynamoDB Local reports it consumed
 *   (ReturnConsumedCapacity, which Local computes by AWS's rules; a table's units are shared among the
 *   call's items in that table by their estimates). A write whose condition fails keeps its estimate.
 *   A Scan, and a Query on an index, are passed through uncharged (they span partitions).
 *   Burst capacity is not modelled: the 300 seconds of unused capacity AWS retains
 *   (burst-adaptive-capacity.html) are a table's, and never lift one partition past its 1,000/3,000.
 *   A bucket holds at most one second of its rate.
 * - Throttling, as an on-demand table answers it (the SDK's error model and TransactWriteItems'
 *   documented cancellation reasons): HTTP 400, `ThrottlingException` with the message below and its
 *   ThrottlingReasons (`TableWriteKeyRangeThroughputExceeded`, API_ThrottlingReason.html); in a
 *   transaction, `ThrottlingError` as the item's cancellation reason; BatchGetItem and BatchWriteItem
 *   return the throttled keys as UnprocessedKeys / UnprocessedItems, and throttle the whole call only
 *   when none of its items can be served.
 * - Transaction conflicts ("Transaction conflict handling in DynamoDB", transaction-apis.html): an
 *   item is held while a TransactWriteItems that includes it is in flight. Another TransactWriteItems
 *   or TransactGetItems including it is cancelled (TransactionCanceledException, `TransactionConflict`
 *   on that item, `None` on the others); a TransactWriteItems including an item a plain write is
 *   writing is cancelled too; a PutItem, UpdateItem or DeleteItem of a held item fails with
 *   TransactionConflictException. GetItem, BatchGetItem and Query are never refused: they read the
 *   last committed value (the isolation table there: serializable / read-committed against
 *   TransactWriteItems; Local applies a transaction atomically).
 * - Scale factor k: the rates are divided by k, and every write holds its items k times as long as it
 *   took in DynamoDB Local, counted up to LOCAL_WRITE_CAP_MS (its time there plus the rest, before the
 *   answer goes back), so a machine serving 5,000/k requests a second sees the occupancy of 5,000 a second.
 */
import { randomUUID } from 'node:crypto';
import { Agent, createServer, type IncomingHttpHeaders, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { crc32 } from 'node:zlib';
import { type Item, itemSize, readUnits, writeUnits } from './dynamodb-units.js';

const WRITE_UNITS_PER_SECOND = 1_000;
const READ_UNITS_PER_SECOND = 3_000;
const PREFIX = 'com.amazonaws.dynamodb.v20120810#';
export const THROTTLE_MESSAGE =
  'Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html';
export const CONFLICT_MESSAGE = 'Transaction is ongoing for the item';

type Kind = 'read' | 'write';
type Body = Record<string, unknown>;

export interface LimitsOptions {
  /** DynamoDB Local's endpoint. */
  target: string;
  /** k: rates divided by it, hold times multiplied by it (default 1). */
  scale?: number;
  port?: number;
  /** The clock (ms) the buckets refill by; tests pass their own. */
  now?: () => number;
  /** What keeps a write's items held after DynamoDB Local answered it (default: stretchMs). */
  hold?: (localMs: number) => Promise<void>;
}

interface PartitionMetrics {
  table: string;
  /** The partition-key value as DynamoDB's JSON writes it, e.g. {"S":"acct-1"}. */
  key: string;
  readUnits: number;
  writeUnits: number;
  /** The most units consumed within one clock second, against the limit per second. */
  peakReadPerSecond: number;
  peakWritePerSecond: number;
  throttled: number;
}

export interface LimitsMetrics {
  scale: number;
  readLimitPerSecond: number;
  writeLimitPerSecond: number;
  calls: number;
  /** Calls (or transaction / batch items) refused for throughput, by operation. */
  throttles: Record<string, number>;
  /** Transactions cancelled for a conflict, and plain writes refused with TransactionConflictException. */
  conflicts: { cancelledTransactions: number; conflictExceptions: number };
  partitions: PartitionMetrics[];
}

export interface DynamoLimits {
  endpoint: string;
  scale: number;
  metrics(): LimitsMetrics;
  resetMetrics(): void;
  close(): Promise<void>;
}

class Bucket {
  private tokens: number;
  private last: number;
  constructor(
    readonly rate: number,
    now: number,
  ) {
    this.tokens = rate;
    this.last = now;
  }
  /** True when `units` can be taken now (a call larger than the bucket needs it full). */
  has(units: number, now: number): boolean {
    this.tokens = Math.min(this.rate, this.tokens + ((now - this.last) / 1000) * this.rate);
    this.last = now;
    return this.tokens >= Math.min(units, this.rate);
  }
  take(units: number): void {
    this.tokens -= units;
  }
}

interface Partition extends PartitionMetrics {
  buckets: Record<Kind, Bucket>;
  second: number;
  thisSecond: Record<Kind, number>;
}

/** One item a call touches, with the units it is estimated to cost. */
interface Touch {
  table: string;
  schema: KeySchema;
  item: string;
  partition: Partition;
  kind: Kind;
  units: number;
  /** A read of whole items: its units from the size of the item found (0 when none), by AWS's rules. */
  readCost?: (bytes: number) => number;
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

interface KeySchema {
  pk: string;
  sk: string | undefined;
  arn: string;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The longest DynamoDB Local time a write's hold is stretched from. Local's time grows with the load on
 * the machine that runs it (a 2-core machine serving the functions too took 50-100 ms a transaction),
 * DynamoDB's does not: stretched k times, that would model a DynamoDB many times slower than AWS's (a
 * TransactWriteItems completes in milliseconds; AWS publishes no figure, so 10 ms is taken as a
 * generous one). Past it, a write is held k x 10 ms in all.
 */
const LOCAL_WRITE_CAP_MS = 10;

export function stretchMs(scale: number, localMs: number): number {
  return Math.max(0, scale * Math.min(localMs, LOCAL_WRITE_CAP_MS) - localMs);
}

export async function startDynamoLimits(options: LimitsOptions): Promise<DynamoLimits> {
  const layer = new LimitsLayer(options);
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (part: Buffer) => parts.push(part));
    req.on('end', () => {
      layer
        .handle(req.headers, Buffer.concat(parts).toString('utf8'), req.method ?? 'POST', req.url ?? '/')
        .then((answer) => {
          const headers = { ...answer.headers };
          for (const hop of ['connection', 'keep-alive', 'transfer-encoding']) delete headers[hop];
          res.writeHead(answer.status, headers);
          res.end(answer.body);
        })
        .catch((error: unknown) => {
          res.writeHead(500, { 'content-type': 'application/x-amz-json-1.0' });
          res.end(JSON.stringify({ __type: `${PREFIX}InternalServerError`, message: String(error) }));
        });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    scale: layer.scale,
    metrics: () => layer.metrics(),
    resetMetrics: () => layer.resetMetrics(),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      layer.agent.destroy();
    },
  };
}

class LimitsLayer {
  readonly scale: number;
  readonly agent = new Agent({ keepAlive: true, maxSockets: 64 });
  private readonly target: URL;
  private readonly now: () => number;
  private readonly hold: (localMs: number) => Promise<void>;
  private readonly schemas = new Map<string, Promise<KeySchema | undefined>>();
  private partitions = new Map<string, Partition>();
  private readonly sizes = new Map<string, number>();
  /** Items of TransactWriteItems in flight, and of plain writes in flight (a count each). */
  private readonly txHeld = new Set<string>();
  private readonly writing = new Map<string, number>();
  private calls = 0;
  private callerHeaders: IncomingHttpHeaders = {};
  private throttles: Record<string, number> = {};
  private conflicts = { cancelledTransactions: 0, conflictExceptions: 0 };

  constructor(options: LimitsOptions) {
    this.scale = options.scale ?? 1;
    if (!(this.scale >= 1)) throw new Error(`the scale factor must be a number >= 1, got ${options.scale}`);
    this.target = new URL(options.target);
    this.now = options.now ?? Date.now;
    this.hold = options.hold ?? ((localMs) => sleep(stretchMs(this.scale, localMs)));
  }

  metrics(): LimitsMetrics {
    const partitions = [...this.partitions.values()]
      .map(({ buckets: _b, second: _s, thisSecond: _t, ...m }) => m)
      .sort(
        (a, b) => b.peakWritePerSecond - a.peakWritePerSecond || b.peakReadPerSecond - a.peakReadPerSecond,
      );
    return {
      scale: this.scale,
      readLimitPerSecond: READ_UNITS_PER_SECOND / this.scale,
      writeLimitPerSecond: WRITE_UNITS_PER_SECOND / this.scale,
      calls: this.calls,
      throttles: { ...this.throttles },
      conflicts: { ...this.conflicts },
      partitions,
    };
  }

  resetMetrics(): void {
    this.partitions = new Map();
    this.calls = 0;
    this.throttles = {};
    this.conflicts = { cancelledTransactions: 0, conflictExceptions: 0 };
  }

  async handle(headers: IncomingHttpHeaders, text: string, method: string, path: string): Promise<Answer> {
    const operation = String(headers['x-amz-target'] ?? '').split('.')[1] ?? '';
    let body: Body;
    try {
      body = JSON.parse(text) as Body;
    } catch {
      return this.forward(headers, text, method, path);
    }
    this.calls += 1;
    this.callerHeaders = headers;
    const send = (input: Body) => this.forward(headers, JSON.stringify(input), method, path);
    switch (operation) {
      case 'GetItem':
      case 'PutItem':
      case 'UpdateItem':
      case 'DeleteItem':
        return this.single(operation, body, send);
      case 'Query':
        return this.query(body, send);
      case 'TransactWriteItems':
      case 'TransactGetItems':
        return this.transaction(operation, body, send);
      case 'BatchGetItem':
      case 'BatchWriteItem':
        return this.batch(operation, body, send);
      default:
        return send(body);
    }
  }

  // --- the operations ---

  private async single(operation: string, body: Body, send: (b: Body) => Promise<Answer>): Promise<Answer> {
    const table = String(body.TableName);
    const kind: Kind = operation === 'GetItem' ? 'read' : 'write';
    const keyed = (operation === 'PutItem' ? body.Item : body.Key) as Item | undefined;
    const schema = await this.schema(table);
    if (!schema || !keyed) return send(body);
    const item = itemId(table, schema, keyed);
    const known = this.sizes.get(item) ?? 0;
    const units =
      kind === 'read'
        ? readUnits(known, body.ConsistentRead === true)
        : writeUnits(Math.max(known, operation === 'PutItem' ? itemSize(keyed) : 0));
    const touch: Touch = {
      table,
      schema,
      item,
      partition: this.partition(table, schema, keyed),
      kind,
      units,
    };
    if (kind === 'write' && this.txHeld.has(item)) {
      this.conflicts.conflictExceptions += 1;
      return errorAnswer('TransactionConflictException', { message: CONFLICT_MESSAGE });
    }
    if (!this.admit([touch])) return this.throttled(operation, [touch], schema.arn);
    if (kind === 'read') return this.settle([touch], body, await send(withCapacity(body)));
    return this.writingItems([item], async () => {
      const answer = await send(withCapacity(body));
      if (answer.status === 200 && operation === 'PutItem') this.sizes.set(item, itemSize(keyed));
      if (answer.status === 200 && operation === 'DeleteItem') this.sizes.delete(item);
      return this.settle([touch], body, answer);
    });
  }

  private async query(body: Body, send: (b: Body) => Promise<Answer>): Promise<Answer> {
    const table = String(body.TableName);
    const schema = await this.schema(table);
    const value = schema && !body.IndexName ? partitionValue(body, schema.pk) : undefined;
    if (!schema || !value) return send(body);
    const keyed = { [schema.pk]: value } as Item;
    const touch: Touch = {
      table,
      schema,
      item: itemId(table, schema, keyed),
      partition: this.partition(table, schema, keyed),
      kind: 'read',
      units: readUnits(0, body.ConsistentRead === true),
    };
    if (!this.admit([touch])) return this.throttled('Query', [touch], schema.arn);
    return this.settle([touch], body, await send(withCapacity(body)));
  }

  private async transaction(
    operation: string,
    body: Body,
    send: (b: Body) => Promise<Answer>,
  ): Promise<Answer> {
    const writes = operation === 'TransactWriteItems';
    const entries = (body.TransactItems as Record<string, Body>[] | undefined) ?? [];
    const touches: Touch[] = [];
    for (const entry of entries) {
      const [action, spec] = Object.entries(entry)[0] ?? [];
      if (!action || !spec) return send(body);
      const table = String(spec.TableName);
      const schema = await this.schema(table);
      const keyed = (action === 'Put' ? spec.Item : spec.Key) as Item | undefined;
      if (!schema || !keyed) return send(body);
      const item = itemId(table, schema, keyed);
      const known = this.sizes.get(item) ?? 0;
      const units = writes
        ? writeUnits(Math.max(known, action === 'Put' ? itemSize(keyed) : 0), true)
        : readUnits(known, true, true);
      touches.push({
        table,
        schema,
        item,
        partition: this.partition(table, schema, keyed),
        kind: writes ? 'write' : 'read',
        units,
        ...(!writes && !spec.ProjectionExpression
          ? { readCost: (bytes: number) => readUnits(bytes, true, true) }
          : {}),
      });
    }
    const reasons: string[] = touches.map((t) =>
      this.txHeld.has(t.item) || (writes && (this.writing.get(t.item) ?? 0) > 0)
        ? 'TransactionConflict'
        : 'None',
    );
    const short = this.shortPartitions(touches);
    touches.forEach((t, i) => {
      if (reasons[i] === 'None' && short.has(t.partition)) reasons[i] = 'ThrottlingError';
    });
    if (reasons.some((r) => r !== 'None')) {
      if (reasons.includes('TransactionConflict')) this.conflicts.cancelledTransactions += 1;
      if (reasons.includes('ThrottlingError'))
        this.countThrottle(
          operation,
          touches.filter((_, i) => reasons[i] === 'ThrottlingError'),
        );
      return errorAnswer('TransactionCanceledException', {
        CancellationReasons: reasons.map((Code) =>
          Code === 'None'
            ? { Code }
            : { Code, Message: Code === 'TransactionConflict' ? CONFLICT_MESSAGE : THROTTLE_MESSAGE },
        ),
        Message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.join(', ')}]`,
      });
    }
    this.take(touches);
    if (!writes) return this.settle(touches, body, await send(withCapacity(body)));
    const items = touches.map((t) => t.item);
    for (const item of items) this.txHeld.add(item);
    try {
      const started = performance.now();
      const answer = await send(withCapacity(body));
      await this.hold(performance.now() - started);
      if (answer.status === 200)
        entries.forEach((entry, i) => {
          const item = items[i] as string;
          if (entry.Put) this.sizes.set(item, itemSize(entry.Put.Item as Item));
          if (entry.Delete) this.sizes.delete(item);
        });
      return this.settle(touches, body, answer);
    } finally {
      for (const item of items) this.txHeld.delete(item);
    }
  }

  private async batch(operation: string, body: Body, send: (b: Body) => Promise<Answer>): Promise<Answer> {
    const reads = operation === 'BatchGetItem';
    const requested = (body.RequestItems as Record<string, unknown>) ?? {};
    const kept: Record<string, unknown> = {};
    const left: Record<string, unknown> = {};
    const touches: Touch[] = [];
    const refused: Touch[] = [];
    let arn = '';
    for (const [table, spec] of Object.entries(requested)) {
      const schema = await this.schema(table);
      if (!schema) return send(body);
      arn ||= schema.arn;
      const list = reads ? ((spec as Body).Keys as Item[]) : (spec as Body[]);
      const consistent = reads && (spec as Body).ConsistentRead === true;
      const keep: unknown[] = [];
      const leave: unknown[] = [];
      for (const element of list) {
        const put = (element as { PutRequest?: { Item: Item } }).PutRequest;
        const keyed = reads
          ? (element as Item)
          : (put?.Item ?? (element as { DeleteRequest: { Key: Item } }).DeleteRequest.Key);
        const item = itemId(table, schema, keyed);
        const known = this.sizes.get(item) ?? 0;
        const touch: Touch = {
          table,
          schema,
          item,
          partition: this.partition(table, schema, keyed),
          kind: reads ? 'read' : 'write',
          units: reads
            ? readUnits(known, consistent)
            : writeUnits(Math.max(known, put ? itemSize(put.Item) : 0)),
        };
        if (reads && !(spec as Body).ProjectionExpression && !(spec as Body).AttributesToGet)
          touch.readCost = (bytes) => readUnits(bytes, consistent);
        if (this.shortPartitions([...touches, touch]).size > 0) {
          refused.push(touch);
          leave.push(element);
        } else {
          touches.push(touch);
          keep.push(element);
        }
      }
      if (keep.length > 0) kept[table] = reads ? { ...(spec as Body), Keys: keep } : keep;
      if (leave.length > 0) left[table] = reads ? { ...(spec as Body), Keys: leave } : leave;
    }
    if (touches.length === 0 && refused.length > 0) return this.throttled(operation, refused, arn);
    if (refused.length > 0) this.countThrottle(operation, refused);
    this.take(touches);
    const run = async () => {
      const answer = await send(withCapacity({ ...body, RequestItems: kept }));
      return this.settle(touches, body, answer, (out) => {
        const field = reads ? 'UnprocessedKeys' : 'UnprocessedItems';
        const merged = { ...((out[field] as Body | undefined) ?? {}) };
        for (const [table, spec] of Object.entries(left)) {
          const already = merged[table] as Body | unknown[] | undefined;
          if (!already) merged[table] = spec;
          else if (reads)
            (already as Body).Keys = [
              ...((already as Body).Keys as unknown[]),
              ...((spec as Body).Keys as unknown[]),
            ];
          else merged[table] = [...(already as unknown[]), ...(spec as unknown[])];
        }
        out[field] = merged;
      });
    };
    return reads
      ? run()
      : this.writingItems(
          touches.map((t) => t.item),
          run,
        );
  }

  // --- capacity ---

  /** The partitions among `touches` that lack the units these touches need of them. */
  private shortPartitions(touches: Touch[]): Set<Partition> {
    const need = new Map<Bucket, { units: number; partition: Partition }>();
    for (const t of touches) {
      const bucket = t.partition.buckets[t.kind];
      const entry = need.get(bucket) ?? { units: 0, partition: t.partition };
      entry.units += t.units;
      need.set(bucket, entry);
    }
    const now = this.now();
    const short = new Set<Partition>();
    for (const [bucket, { units, partition }] of need) if (!bucket.has(units, now)) short.add(partition);
    return short;
  }

  private admit(touches: Touch[]): boolean {
    if (this.shortPartitions(touches).size > 0) return false;
    this.take(touches);
    return true;
  }

  private take(touches: Touch[]): void {
    for (const t of touches) this.charge(t, t.units);
  }

  private charge(t: Touch, units: number): void {
    const p = t.partition;
    p.buckets[t.kind].take(units);
    const second = Math.floor(this.now() / 1000);
    if (second !== p.second) {
      p.second = second;
      p.thisSecond = { read: 0, write: 0 };
    }
    p.thisSecond[t.kind] += units;
    if (t.kind === 'read') {
      p.readUnits += units;
      p.peakReadPerSecond = Math.max(p.peakReadPerSecond, p.thisSecond.read);
    } else {
      p.writeUnits += units;
      p.peakWritePerSecond = Math.max(p.peakWritePerSecond, p.thisSecond.write);
    }
  }

  /**
   * The answer's consumed capacity replaces the estimates taken at admission; a write refused by its
   * condition keeps them (AWS charges it); any other failure gives them back. ConsumedCapacity is
   * taken out of the answer again unless the caller asked for it.
   */
  private settle(touches: Touch[], request: Body, answer: Answer, edit?: (out: Body) => void): Answer {
    let out: Body | undefined;
    try {
      out = JSON.parse(answer.body) as Body;
    } catch {
      out = undefined;
    }
    if (answer.status !== 200 || !out) {
      const type = String(out?.__type ?? '');
      const consumed =
        type.endsWith('#ConditionalCheckFailedException') || type.endsWith('#TransactionCanceledException');
      if (!consumed) for (const t of touches) this.charge(t, -t.units);
      return answer;
    }
    const capacity = out.ConsumedCapacity as
      | { TableName: string; CapacityUnits?: number }
      | { TableName: string; CapacityUnits?: number }[]
      | undefined;
    // Whole-item reads: from the items found (DynamoDB Local charges a missing item of a batch nothing;
    // AWS charges each item of a BatchGetItem as its own GetItem, a missing one the minimum).
    const found = new Map<string, number>();
    for (const { table, item } of foundItems(request, out)) {
      const t = touches.find(
        (c) => c.readCost && c.table === table && c.item === itemId(table, c.schema, item),
      );
      if (t) found.set(t.item, itemSize(item));
    }
    for (const t of touches) {
      if (!t.readCost) continue;
      const bytes = found.get(t.item);
      if (bytes === undefined) this.sizes.delete(t.item);
      else this.sizes.set(t.item, bytes);
      this.charge(t, t.readCost(bytes ?? 0) - t.units);
    }
    // Everything else: what DynamoDB Local consumed, a table's units shared by its items' estimates.
    for (const entry of Array.isArray(capacity) ? capacity : capacity ? [capacity] : []) {
      if (entry.CapacityUnits === undefined) continue;
      const inTable = touches.filter((t) => t.table === entry.TableName && !t.readCost);
      const estimated = inTable.reduce((sum, t) => sum + t.units, 0);
      for (const t of inTable) this.charge(t, (entry.CapacityUnits * t.units) / estimated - t.units);
    }
    if (this.sizes.size > 200_000) this.sizes.clear();
    if (!request.ReturnConsumedCapacity || request.ReturnConsumedCapacity === 'NONE')
      delete out.ConsumedCapacity;
    edit?.(out);
    return rewritten(answer, JSON.stringify(out));
  }

  private throttled(operation: string, touches: Touch[], arn: string): Answer {
    this.countThrottle(operation, touches);
    const kind = touches[0]?.kind === 'read' ? 'Read' : 'Write';
    return errorAnswer('ThrottlingException', {
      message: THROTTLE_MESSAGE,
      ThrottlingReasons: [{ reason: `Table${kind}KeyRangeThroughputExceeded`, resource: arn }],
    });
  }

  private countThrottle(operation: string, touches: Touch[]): void {
    this.throttles[operation] = (this.throttles[operation] ?? 0) + 1;
    for (const p of new Set(touches.map((t) => t.partition))) p.throttled += 1;
  }

  /** Runs a plain write with its items marked as being written, held as long as the scale factor says. */
  private async writingItems(items: string[], run: () => Promise<Answer>): Promise<Answer> {
    for (const item of items) this.writing.set(item, (this.writing.get(item) ?? 0) + 1);
    try {
      const started = performance.now();
      const answer = await run();
      await this.hold(performance.now() - started);
      return answer;
    } finally {
      for (const item of items) {
        const left = (this.writing.get(item) ?? 1) - 1;
        if (left > 0) this.writing.set(item, left);
        else this.writing.delete(item);
      }
    }
  }

  // --- tables, keys, partitions ---

  /** The table's key schema, asked of DynamoDB Local with the caller's credentials (Local keeps data by them). */
  private schema(table: string): Promise<KeySchema | undefined> {
    let schema = this.schemas.get(table);
    if (!schema) {
      schema = this.forward(
        { ...this.callerHeaders, 'x-amz-target': 'DynamoDB_20120810.DescribeTable' },
        JSON.stringify({ TableName: table }),
        'POST',
        '/',
      ).then((answer) => {
        if (answer.status !== 200) {
          this.schemas.delete(table);
          return undefined;
        }
        const { Table } = JSON.parse(answer.body) as {
          Table: { KeySchema: { AttributeName: string; KeyType: string }[]; TableArn: string };
        };
        return {
          pk: Table.KeySchema.find((k) => k.KeyType === 'HASH')?.AttributeName ?? '',
          sk: Table.KeySchema.find((k) => k.KeyType === 'RANGE')?.AttributeName,
          arn: Table.TableArn,
        };
      });
      this.schemas.set(table, schema);
    }
    return schema;
  }

  private partition(table: string, schema: KeySchema, keyed: Item): Partition {
    const key = JSON.stringify(keyed[schema.pk] ?? null);
    const id = `${table}\u0000${key}`;
    let p = this.partitions.get(id);
    if (!p) {
      const now = this.now();
      p = {
        table,
        key,
        readUnits: 0,
        writeUnits: 0,
        peakReadPerSecond: 0,
        peakWritePerSecond: 0,
        throttled: 0,
        buckets: {
          read: new Bucket(READ_UNITS_PER_SECOND / this.scale, now),
          write: new Bucket(WRITE_UNITS_PER_SECOND / this.scale, now),
        },
        second: Math.floor(now / 1000),
        thisSecond: { read: 0, write: 0 },
      };
      this.partitions.set(id, p);
    }
    return p;
  }

  forward(headers: IncomingHttpHeaders, body: string, method: string, path: string): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const outgoing = request(
        {
          host: this.target.hostname,
          port: this.target.port,
          path,
          method,
          agent: this.agent,
          headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        },
        (answer) => {
          const parts: Buffer[] = [];
          answer.on('data', (part: Buffer) => parts.push(part));
          answer.on('end', () =>
            resolve({
              status: answer.statusCode ?? 500,
              headers: answer.headers,
              body: Buffer.concat(parts).toString('utf8'),
            }),
          );
          answer.on('error', reject);
        },
      );
      outgoing.on('error', reject);
      outgoing.end(body);
    });
  }
}

function itemId(table: string, schema: KeySchema, keyed: Item): string {
  const sort = schema.sk ? JSON.stringify(keyed[schema.sk] ?? null) : '';
  return `${table}\u0000${JSON.stringify(keyed[schema.pk] ?? null)}\u0000${sort}`;
}

/** The partition-key value a Query's key condition names (`pk = :v` or `#alias = :v`). */
function partitionValue(body: Body, pk: string): Record<string, unknown> | undefined {
  const names = (body.ExpressionAttributeNames as Record<string, string> | undefined) ?? {};
  const values =
    (body.ExpressionAttributeValues as Record<string, Record<string, unknown>> | undefined) ?? {};
  for (const [, name, value] of String(body.KeyConditionExpression ?? '').matchAll(
    /(#?[\w.-]+)\s*=\s*(:[\w-]+)/g,
  )) {
    if ((names[name as string] ?? name) === pk) return values[value as string];
  }
  return undefined;
}

/** The items an answer carries, with their tables (GetItem, BatchGetItem, TransactGetItems). */
function foundItems(request: Body, out: Body): { table: string; item: Item }[] {
  const found: { table: string; item: Item }[] = [];
  if (out.Item) found.push({ table: String(request.TableName), item: out.Item as Item });
  const responses = out.Responses as Record<string, Item[]> | { Item?: Item }[] | undefined;
  if (Array.isArray(responses)) {
    const asked = (request.TransactItems as { Get: { TableName: string } }[] | undefined) ?? [];
    responses.forEach((response, i) => {
      const table = asked[i]?.Get.TableName;
      if (response.Item && table) found.push({ table, item: response.Item });
    });
  } else if (responses) {
    for (const [table, items] of Object.entries(responses))
      for (const item of items) found.push({ table, item });
  }
  return found;
}

function withCapacity(body: Body): Body {
  return body.ReturnConsumedCapacity && body.ReturnConsumedCapacity !== 'NONE'
    ? body
    : { ...body, ReturnConsumedCapacity: 'TOTAL' };
}

function rewritten(answer: Answer, body: string): Answer {
  const headers: IncomingHttpHeaders = {
    ...answer.headers,
    'content-length': String(Buffer.byteLength(body)),
  };
  delete headers['transfer-encoding'];
  delete headers.connection;
  delete headers['keep-alive'];
  if (headers['x-amz-crc32'] !== undefined) headers['x-amz-crc32'] = String(crc32(body));
  return { status: answer.status, headers, body };
}

function errorAnswer(code: string, fields: Body): Answer {
  const body = JSON.stringify({ __type: `${PREFIX}${code}`, ...fields });
  return {
    status: 400,
    headers: {
      'content-type': 'application/x-amz-json-1.0',
      'content-length': String(Buffer.byteLength(body)),
      'x-amzn-requestid': randomUUID(),
      'x-amz-crc32': String(crc32(body)),
    },
    body,
  };
}
