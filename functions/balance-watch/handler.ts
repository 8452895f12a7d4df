/**
 * The balance watch function (watch.ts), invoked three ways (lib/infra/balance-watch.ts): by the
 * accounts table's stream, with the records its filters passed (stream.ts); by an hourly schedule,
 * `{"run":"sweep"}`, the safety sweep; by a schedule every few minutes, `{"run":"outbox"}`, the e-mails
 * the dashboard queued. `npm start` runs the same code (lib/local/stack.ts). Its dependencies: deps.ts.
 */
import middy from '@middy/core';
import type { DynamoDBStreamEvent } from 'aws-lambda';
import { logContext, logger, recordEmailsDeadLettered, recordWatchRun } from '../shared/observability.js';
import { watchDeps } from './deps.js';
import { accountsToWatch } from './stream.js';
import { outboxRun, runWatch, type WatchRun, watchAccounts } from './watch.js';

type WatchEvent = Partial<DynamoDBStreamEvent> & { run?: 'sweep' | 'outbox' };

export const handler = middy<WatchEvent, WatchRun>()
  .use(logContext())
  .handler(async (event) => {
    const deps = watchDeps();
    const kind = event.Records ? 'stream' : event.run === 'sweep' ? 'sweep' : 'outbox';
    const result =
      kind === 'stream'
        ? await watchAccounts(deps, accountsToWatch(event.Records ?? []))
        : kind === 'sweep'
          ? await runWatch(deps)
          : await outboxRun(deps);
    logger.info('balance watch run', { kind, records: event.Records?.length, ...result });
    recordWatchRun(kind);
    recordEmailsDeadLettered(result.deadLettered);
    // A failure on an account or an e-mail fails the invocation (the Errors alarm; a stream batch is
    // retried, then left to the sweep); a dead letter does not.
    if (result.failures > 0) throw new Error(`balance watch: ${result.failures} failure(s), see the log`);
    return result;
  });
