/**
 * The logged-usage function: CloudWatch Logs delivers it the completions function's `generation usage`
 * lines (a subscription filter, lib/infra/api-stack.ts), and it bills those whose generation has no
 * ledger entry (bill.ts). Delivery is an asynchronous invocation: a failed one is retried twice by
 * Lambda, then lands in the dead-letter queue (alarmed); the line stays in the log for
 * `admin bill-logged` either way. https://docs.aws.amazon.com/lambda/latest/dg/invocation-async.html
 */
import middy from '@middy/core';
import type { CloudWatchLogsEvent } from 'aws-lambda';
import { getStore } from '../adapters/dynamodb/index.js';
import { logContext, recordLoggedUsage } from '../shared/observability.js';
import { billLoggedUsage, type LoggedUsageResult } from './bill.js';
import { decodeLogsEvent } from './subscription-event.js';

export const handler = middy<CloudWatchLogsEvent, LoggedUsageResult>()
  .use(logContext())
  .handler(async (event) => {
    const batch = decodeLogsEvent(event);
    const result = await billLoggedUsage(getStore(), batch);
    recordLoggedUsage({ billed: result.billed.length, unreadable: result.unreadable });
    return result;
  });
