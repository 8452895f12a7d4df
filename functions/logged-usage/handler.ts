/**
 * The logged-usage function: CloudWatch Logs delivers it the completions function's `generation usage`
 * lines (a subscription filter, lib/infra/api-stack.ts), and it bills those whose generation has no
 * ledger entry (bill.ts), if signed with the usage-signing key and within what their generation could
 * have cost. Delivery is an asynchronous invocation: a failed one is retried twice by
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
    // A refused line is counted with the unreadable ones (`LoggedUsageUnreadable`, alarmed): a line
    // only an operator can look at, and perhaps a charge someone tried to make.
    recordLoggedUsage({ billed: result.billed.length, unreadable: result.unreadable + result.refused });
    return result;
  });
