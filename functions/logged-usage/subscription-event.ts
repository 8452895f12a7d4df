/**
 * The event CloudWatch Logs invokes a subscribed function with: `{ awslogs: { data } }`, `data` the
 * base64 of the gzip of one JSON document, `{ messageType, owner, logGroup, logStream,
 * subscriptionFilters, logEvents: [{ id, timestamp, message }] }`. A `CONTROL_MESSAGE` only checks
 * that the destination is reachable and carries no log event of ours; `DATA_MESSAGE` carries them.
 * https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/SubscriptionFilters.html#LambdaFunctionExample
 * https://docs.aws.amazon.com/lambda/latest/dg/services-cloudwatchlogs.html
 */
import { gunzipSync } from 'node:zlib';
import type { CloudWatchLogsEvent, CloudWatchLogsLogEvent } from 'aws-lambda';

/**
 * The most a batch may inflate to. A log event is at most 256 KB and Lambda takes an asynchronous
 * payload of at most 1 MB, so a real batch stays far below; past this it is not one of CloudWatch
 * Logs' batches, and it is refused before it is held in memory (the function has 256 MB).
 */
const MAX_BATCH_BYTES = 32 * 1024 * 1024;

export interface LogBatch {
  logGroup: string;
  logStream: string;
  /** Empty for a control message. */
  logEvents: CloudWatchLogsLogEvent[];
}

/** The batch in `event`; throws if it is not one (nothing in it can be read, so none of it is lost by a retry). */
export function decodeLogsEvent(event: CloudWatchLogsEvent): LogBatch {
  const data = event?.awslogs?.data;
  if (typeof data !== 'string') throw new Error('not a CloudWatch Logs subscription event: no awslogs.data');
  let text: string;
  try {
    text = gunzipSync(Buffer.from(data, 'base64'), { maxOutputLength: MAX_BATCH_BYTES }).toString('utf8');
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE')
      throw new Error(`subscription event larger than ${MAX_BATCH_BYTES} bytes once inflated`);
    throw error;
  }
  const doc = JSON.parse(text) as {
    messageType?: unknown;
    logGroup?: unknown;
    logStream?: unknown;
    logEvents?: unknown;
  };
  const logGroup = String(doc.logGroup ?? '');
  const logStream = String(doc.logStream ?? '');
  if (doc.messageType === 'CONTROL_MESSAGE') return { logGroup, logStream, logEvents: [] };
  if (doc.messageType !== 'DATA_MESSAGE' || !Array.isArray(doc.logEvents))
    throw new Error(`not a CloudWatch Logs data message: ${String(doc.messageType)}`);
  const logEvents = doc.logEvents.map((e: Partial<CloudWatchLogsLogEvent> | null) => ({
    id: String(e?.id ?? ''),
    timestamp: Number(e?.timestamp ?? 0),
    message: typeof e?.message === 'string' ? e.message : '',
  }));
  return { logGroup, logStream, logEvents };
}
