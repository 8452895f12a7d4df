import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';

/**
 * Structured JSON logs and CloudWatch metrics (EMF). What may be logged: request id, account id,
 * key id, generation id, tier, tokens, cost, latency. What may never be: an API key, a prompt, a
 * completion, a credential. Both are switched off with Powertools' own settings
 * (`LOG_LEVEL=SILENT`, `POWERTOOLS_METRICS_DISABLED=true`), as the tests and the bench do.
 * A generation's tokens and billed amount are not metrics lines: CloudWatch reads them from its one
 * usage log line (lib/infra/generation-metrics.ts).
 */
export const logger = new Logger({
  serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? 'hosted-model-api',
  logLevel: (process.env.LOG_LEVEL as 'INFO' | 'DEBUG' | 'WARN' | 'ERROR' | 'SILENT' | undefined) ?? 'INFO',
});

/**
 * Each log line of an invocation carries its Lambda context (request id, function, cold start):
 * Powertools' `logger.addContext`, as its `injectLambdaContext` middleware calls it, without the
 * rest of that middleware's per-invocation work, which does nothing here (no log buffer, no keys
 * appended to reset, no log sampling: were POWERTOOLS_LOGGER_SAMPLE_RATE set, its draw would be per
 * instance, not per invocation) and cost about 10 us of CPU an invocation (Node 22, 5 ms apart).
 */
export function logContext<E, R>(): MiddlewareObj<E, R, Error, Context> {
  return {
    before: (request) => {
      logger.addContext(request.context);
    },
  };
}

const metrics = new Metrics({
  namespace: process.env.POWERTOOLS_METRICS_NAMESPACE ?? 'HostedModelApi',
  serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? 'hosted-model-api',
});

/** Counts of billing failures, read by tests and by the local emulator's operator. */
export const billingFailures = { count: 0 };

/**
 * A generation that could not be billed nor its settlement deferred to the sweeper: logged with its
 * full usage record (so it can be charged by `admin bill-logged`) and counted in the `BillingFailures`
 * metric, which has an alarm. A settlement that committed though its answer was lost is not one.
 */
export function recordBillingFailure(record: Record<string, unknown>, error: unknown): void {
  billingFailures.count += 1;
  logger.error('billing failed', { ...record, error: error instanceof Error ? error : String(error) });
  metrics.addMetric('BillingFailures', MetricUnit.Count, 1);
  metrics.publishStoredMetrics();
}

/** Usage records that could not be kept on their holds, read by tests. */
export const usageRecordFailures = { count: 0 };

/**
 * A held request's usage record that could not be written onto its hold (the write failed, not a
 * hold already gone): should the function die before its settlement, the sweeper would release the
 * hold unbilled and only the log line could bill it. Logged as an error and counted in the
 * `UsageRecordFailures` metric, which has an alarm.
 */
export function recordUsageRecordFailure(generationId: string, error: unknown): void {
  usageRecordFailures.count += 1;
  logger.error('usage record not kept on its hold', {
    generationId,
    error: error instanceof Error ? error : String(error),
  });
  metrics.addMetric('UsageRecordFailures', MetricUnit.Count, 1);
  metrics.publishStoredMetrics();
}

/** Settlement contention and deferrals, read by tests. */
export const settlements = { conflicts: 0, retries: 0, deferred: 0, completedBySweeper: 0 };

/**
 * A settlement that met other transactions on its items: its conflicts and retries, as the metrics
 * `SettlementConflicts` and `SettlementRetries` (one line per contended settlement; none otherwise).
 */
export function recordSettlementContention(contention: { conflicts: number; retries: number }): void {
  settlements.conflicts += contention.conflicts;
  settlements.retries += contention.retries;
  metrics.addMetric('SettlementConflicts', MetricUnit.Count, contention.conflicts);
  metrics.addMetric('SettlementRetries', MetricUnit.Count, contention.retries);
  metrics.publishStoredMetrics();
}

/** A settlement left to the sweeper (durably): metric `SettlementsDeferred`. Not a failure. */
export function recordSettlementDeferred(generationId: string, error: unknown): void {
  settlements.deferred += 1;
  logger.warn('settlement deferred to the sweeper', {
    generationId,
    error: error instanceof Error ? error : String(error),
  });
  metrics.addMetric('SettlementsDeferred', MetricUnit.Count, 1);
  metrics.publishStoredMetrics();
}

/** A deferred (or orphaned) settlement the sweeper completed: metric `DeferredSettlementsCompleted`. */
export function recordDeferredSettlementCompleted(): void {
  settlements.completedBySweeper += 1;
  metrics.addMetric('DeferredSettlementsCompleted', MetricUnit.Count, 1);
  metrics.publishStoredMetrics();
}

/** Counts of usage reports billed at a bound instead of as reported, read by tests. */
export const usageAdjustments = { count: 0 };

/**
 * An upstream usage report outside what the request could have used (or unreadable): logged with the
 * raw report and counted in the `UsageOutOfBounds` metric, which has an alarm. The bill used the bound.
 */
export function recordUsageOutOfBounds(record: Record<string, unknown>): void {
  usageAdjustments.count += 1;
  logger.warn('upstream usage out of bounds', record);
  metrics.addMetric('UsageOutOfBounds', MetricUnit.Count, 1);
  metrics.publishStoredMetrics();
}

/** Holds released by the sweeper after expiry, read by tests. */
export const expiredHolds = { released: 0 };

/** An expired hold released: its request was never billed (revenue to look at). Metric `ExpiredHoldsReleased`. */
export function recordExpiredHoldReleased(): void {
  expiredHolds.released += 1;
  metrics.addMetric('ExpiredHoldsReleased', MetricUnit.Count, 1);
  metrics.publishStoredMetrics();
}

/** A sweep finished: the heartbeat the sweeper alarm watches (no sweep in 5 minutes is an alarm). */
export function recordSweep(): void {
  metrics.addMetric('SweeperRuns', MetricUnit.Count, 1);
  metrics.publishStoredMetrics();
}

/**
 * A balance-watch run finished (whatever failed in it, which its own alarm reports): the heartbeats
 * its "not running" alarms watch: `BalanceWatchRuns` for every scheduled run (the outbox's every few
 * minutes, the sweep's hourly), `BalanceWatchSweeps` for the safety sweep's alone. A stream batch's is
 * neither (the stream's IteratorAge tells when it falls behind).
 */
export function recordWatchRun(kind: 'stream' | 'sweep' | 'outbox'): void {
  if (kind === 'stream') return;
  metrics.addMetric('BalanceWatchRuns', MetricUnit.Count, 1);
  if (kind === 'sweep') metrics.addMetric('BalanceWatchSweeps', MetricUnit.Count, 1);
  metrics.publishStoredMetrics();
}

/**
 * Low-balance and auto-top-up e-mails the balance watch took out of its outbox unsent (SES refused
 * them for good, or too many attempts failed): `EmailsDeadLettered`, alarmed. Nothing for a run with none.
 */
export function recordEmailsDeadLettered(count: number): void {
  if (count === 0) return;
  metrics.addMetric('EmailsDeadLettered', MetricUnit.Count, count);
  metrics.publishStoredMetrics();
}

/** Accounts below zero right now (a money invariant: at most one request's overage each, briefly). */
export function recordNegativeBalances(count: number): void {
  metrics.addMetric('NegativeBalanceAccounts', MetricUnit.Count, count);
  metrics.publishStoredMetrics();
}

/** Requests refused for a missing or wrong origin secret (bare Function URL calls). For tests: the count. */
export const originRefused = { count: 0 };
export function recordOriginRefused(): void {
  originRefused.count += 1;
  metrics.addMetric('OriginRefused', MetricUnit.Count, 1);
  metrics.publishStoredMetrics();
}

/** What the logged-usage function billed and could not read, read by tests. */
export const loggedUsage = { billed: 0, unreadable: 0 };

/**
 * One batch of usage lines delivered by CloudWatch Logs (functions/logged-usage/): the generations it
 * billed, each one whose function died before settling it (`LoggedGenerationsBilled`, alarmed: worth a
 * look at that function's log), and the usage lines it could not read (`LoggedUsageUnreadable`,
 * alarmed: a charge only an operator can recover). Nothing is written for a batch with neither.
 */
export function recordLoggedUsage(counts: { billed: number; unreadable: number }): void {
  if (counts.billed === 0 && counts.unreadable === 0) return;
  loggedUsage.billed += counts.billed;
  loggedUsage.unreadable += counts.unreadable;
  metrics.addMetric('LoggedGenerationsBilled', MetricUnit.Count, counts.billed);
  metrics.addMetric('LoggedUsageUnreadable', MetricUnit.Count, counts.unreadable);
  metrics.publishStoredMetrics();
}
