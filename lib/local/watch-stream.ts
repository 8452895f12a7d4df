/**
 * The local stand-in for the balance watch's event source mapping (lib/infra/balance-watch.ts): it
 * reads the accounts table's stream from DynamoDB Local through the Streams API, as Lambda's poller
 * does, with the watch's role (so the IAM layer holds DescribeStream, GetShardIterator and GetRecords to
 * its synthesized policy): each shard from its start (TRIM_HORIZON, as the mapping), a few times a
 * second; the records its filters pass (stream-filter.ts, the mapping's own STREAM_FILTERS) are
 * handed to `invoke` as a DynamoDBStreamEvent, in batches of up to BATCH_SIZE in shard order; a batch
 * that throws is invoked again, up to RETRY_ATTEMPTS more times, then dropped (the safety sweep's), as
 * the mapping's retryAttempts.
 */

import type { DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import aws4 from 'aws4';
import { STREAM_FILTERS } from '../../functions/balance-watch/stream.js';
import { passes } from './stream-filter.js';

const BATCH_SIZE = 100;
const RETRY_ATTEMPTS = 3;
const POLL_MS = 250;

export interface StreamDelivery {
  /** Resolves once every record written before the call has been read and its batch handled. */
  idle(): Promise<void>;
  /** Batches handed to `invoke` so far, and their records (tests and the cost count read them). */
  counts(): { invocations: number; records: number; read: number };
  stop(): Promise<void>;
}

export interface StreamDeliveryOptions {
  /** The IAM layer's endpoint, and the role's credentials it signs with. */
  endpoint: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
  streamArn: string;
  /** Read nothing (a test that drives the watch's runs itself): `idle()` resolves at once. */
  paused?: boolean;
  invoke(event: DynamoDBStreamEvent): Promise<void>;
  onError?(error: unknown): void;
}

export function deliverStream(options: StreamDeliveryOptions): StreamDelivery {
  if (options.paused)
    return {
      idle: async () => {},
      counts: () => ({ invocations: 0, records: 0, read: 0 }),
      stop: async () => {},
    };
  const url = new URL(options.endpoint);
  const call = async <T>(operation: string, body: Record<string, unknown>): Promise<T> => {
    const request = aws4.sign(
      {
        host: url.host,
        path: '/',
        method: 'POST',
        service: 'dynamodb',
        region: 'us-east-1',
        headers: {
          'content-type': 'application/x-amz-json-1.0',
          'x-amz-target': `DynamoDBStreams_20120810.${operation}`,
        },
        body: JSON.stringify(body),
      },
      options.credentials,
    );
    const res = await fetch(`${options.endpoint}/`, {
      method: 'POST',
      headers: request.headers as Record<string, string>,
      body: request.body as string,
    });
    const answer = (await res.json()) as T & { __type?: string; Message?: string };
    if (!res.ok) throw new Error(`${operation}: ${answer.__type ?? res.status}: ${answer.Message ?? ''}`);
    return answer;
  };

  const iterators = new Map<string, string | null>();
  const counts = { invocations: 0, records: 0, read: 0 };
  let ticks = 0;
  let stopped = false;
  const waiting: { after: number; resolve: () => void }[] = [];

  const invokeWithRetries = async (records: DynamoDBRecord[]) => {
    for (let attempt = 0; ; attempt++) {
      counts.invocations += 1;
      try {
        await options.invoke({ Records: records });
        return;
      } catch (error) {
        options.onError?.(error);
        if (attempt >= RETRY_ATTEMPTS) return;
      }
    }
  };

  const tick = async () => {
    const { StreamDescription } = await call<{ StreamDescription: { Shards: { ShardId: string }[] } }>(
      'DescribeStream',
      { StreamArn: options.streamArn },
    );
    for (const { ShardId } of StreamDescription.Shards) {
      if (iterators.has(ShardId)) continue;
      const { ShardIterator } = await call<{ ShardIterator: string }>('GetShardIterator', {
        StreamArn: options.streamArn,
        ShardId,
        ShardIteratorType: 'TRIM_HORIZON',
      });
      iterators.set(ShardId, ShardIterator);
    }
    for (const [shard, start] of iterators) {
      let iterator = start;
      while (iterator) {
        const page = await call<{ Records?: DynamoDBRecord[]; NextShardIterator?: string }>('GetRecords', {
          ShardIterator: iterator,
        }).catch((error: unknown) => {
          // An iterator past its shard's retained records, or expired (a long pause under load): as
          // Lambda's poller, start the shard again from its oldest record (a record read twice is
          // applied once: the watch's transitions are conditional) at the next tick; this one fails.
          if (/TrimmedDataAccessException|ExpiredIteratorException/.test(String(error)))
            iterators.delete(shard);
          throw error;
        });
        iterator = page.NextShardIterator ?? null;
        iterators.set(shard, iterator);
        const records = page.Records ?? [];
        counts.read += records.length;
        const passed = records.filter((record) => passes(STREAM_FILTERS, record));
        for (let i = 0; i < passed.length; i += BATCH_SIZE) {
          const batch = passed.slice(i, i + BATCH_SIZE);
          counts.records += batch.length;
          await invokeWithRetries(batch);
        }
        if (records.length === 0) break;
      }
    }
  };

  const loop = async () => {
    while (!stopped) {
      const started = ticks;
      try {
        await tick();
        // Only a tick that read every shard to its end counts toward idle(): a failed one (a call
        // refused or timed out under load) is tried again, as Lambda's poller does.
        ticks = started + 1;
      } catch (error) {
        options.onError?.(error);
      }
      for (const wait of waiting.splice(0))
        if (ticks > wait.after) wait.resolve();
        else waiting.push(wait);
      if (!stopped) await new Promise((resolve) => setTimeout(resolve, POLL_MS).unref());
    }
  };
  const running = loop();

  return {
    // A tick that starts after this call reads every record written before it.
    idle: () => new Promise((resolve) => waiting.push({ after: ticks + 1, resolve })),
    counts: () => ({ ...counts }),
    stop: async () => {
      stopped = true;
      await running;
      for (const wait of waiting.splice(0)) wait.resolve();
    },
  };
}
