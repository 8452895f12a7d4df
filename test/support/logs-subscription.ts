/**
 * CloudWatch Logs subscription events as AWS delivers them to a function: the JSON document
 * `{ messageType, owner, logGroup, logStream, subscriptionFilters, logEvents }`, gzipped, base64, under
 * `awslogs.data` (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/SubscriptionFilters.html).
 */
import { gzipSync } from 'node:zlib';
import type { CloudWatchLogsEvent } from 'aws-lambda';

export interface LoggedLine {
  message: string;
  timestamp?: number;
}

let sequence = 0;

export function subscriptionEvent(
  lines: readonly LoggedLine[],
  messageType: 'DATA_MESSAGE' | 'CONTROL_MESSAGE' = 'DATA_MESSAGE',
): CloudWatchLogsEvent {
  const doc = {
    messageType,
    owner: messageType === 'CONTROL_MESSAGE' ? 'CloudwatchLogs' : '123456789012',
    logGroup: messageType === 'CONTROL_MESSAGE' ? '' : '/aws/lambda/Completions',
    logStream: messageType === 'CONTROL_MESSAGE' ? '' : '2025/01/01/[$LATEST]0123456789abcdef',
    subscriptionFilters: messageType === 'CONTROL_MESSAGE' ? [] : ['GenerationUsage'],
    logEvents: lines.map(({ message, timestamp }) => ({
      // AWS's ids are 56 digit strings.
      id: String(++sequence).padStart(56, '3'),
      timestamp: timestamp ?? Date.now(),
      message,
    })),
  };
  return { awslogs: { data: gzipSync(JSON.stringify(doc)).toString('base64') } };
}

/** The JSON lines of `text` a filter `{ $.message = "<message>" }` matches, with their own timestamps. */
export function linesMatching(text: string, message: string): LoggedLine[] {
  const lines: LoggedLine[] = [];
  for (const line of text.split(/\r?\n/)) {
    const start = line.indexOf('{');
    if (start < 0) continue;
    try {
      const parsed = JSON.parse(line.slice(start)) as { message?: unknown; timestamp?: unknown };
      if (parsed.message !== message) continue;
      const at = typeof parsed.timestamp === 'string' ? Date.parse(parsed.timestamp) : Number.NaN;
      lines.push({ message: line.slice(start), ...(Number.isFinite(at) ? { timestamp: at } : {}) });
    } catch {
      // not JSON: a filter on a JSON field does not match it
    }
  }
  return lines;
}
