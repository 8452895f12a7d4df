/**
 * The payments reconciler (functions/reconciler/): a function run every RECONCILE_INTERVAL_MINUTES by
 * an EventBridge Scheduler schedule that applies, through the webhook's own code, the Stripe events the
 * webhook did not get. Exactly the grants its code needs: the payments function's ledger writes (a
 * top-up, a refund's or dispute's correction, a suspension), its checkpoint (one item of the ledger
 * table), the Stripe secret's read, and where a dashboard is deployed the watch items an auto top-up's
 * outcome and a saved card are written to. Failures are alarmed three ways: its errors, its
 * dead-letter queue (a run Lambda gave up on, or a scheduled invocation Scheduler could not make), and
 * its heartbeat (no run finished in an hour: not running).
 */
import { Duration, type RemovalPolicy, Stack } from 'aws-cdk-lib';
import { Alarm, ComparisonOperator, Metric, TreatMissingData } from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyDocument, PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { CfnSchedule } from 'aws-cdk-lib/aws-scheduler';
import type { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { RECONCILE_INTERVAL_MINUTES } from '../../functions/reconciler/schedule.js';
import { DASHBOARD_TABLE_ENV } from '../tables.js';
import { SERVICE_DIMENSIONS, SERVICE_NAMESPACE } from './alarms.js';
import { ServiceFunction } from './service-function.js';

/** Its timeout and memory: a run works at most 60 s (reconcile.ts, RUN_BUDGET_MS), then saves its place. */
const RECONCILER_SETTINGS = { timeoutSeconds: 90, memoryMb: 256 } as const;

/** The metrics it alarms on, as functions/payments/metrics.ts emits them (test/infra checks they agree). */
const RECONCILER_METRICS = {
  runs: 'PaymentsReconcilerRuns',
  reconciled: 'PaymentsReconciled',
} as const;

/** No run finished in this long: the "not running" alarm (six runs missed). */
const NOT_RUNNING_AFTER = Duration.hours(1);

export interface ReconcilerProps {
  tables: { accounts: TableV2; ledger: TableV2; holds: TableV2; audit: TableV2 };
  tableEnv: Record<string, string>;
  stripeSecret: Secret;
  /** The dashboard's table and billing page, where it is deployed (the watch items live there). */
  dashboard?: { table: TableV2; billingUrl: string };
  alarmTopic: ITopic;
  logRetention: RetentionDays;
  removalPolicy: RemovalPolicy;
}

export class Reconciler extends Construct {
  readonly function: ServiceFunction;
  readonly failures: Queue;

  constructor(scope: Construct, id: string, props: ReconcilerProps) {
    super(scope, id);
    const { tables } = props;
    this.failures = new Queue(scope, 'PaymentsReconcilerFailures', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
      removalPolicy: props.removalPolicy,
    });
    this.function = new ServiceFunction(scope, 'PaymentsReconciler', {
      entry: 'functions/reconciler/handler.ts',
      memorySize: RECONCILER_SETTINGS.memoryMb,
      timeout: Duration.seconds(RECONCILER_SETTINGS.timeoutSeconds),
      deadLetterQueue: this.failures,
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
      environment: {
        ...props.tableEnv,
        STRIPE_SECRET_ARN: props.stripeSecret.secretArn,
        ...(props.dashboard
          ? {
              [DASHBOARD_TABLE_ENV]: props.dashboard.table.tableName,
              BILLING_URL: props.dashboard.billingUrl,
            }
          : {}),
      },
    });
    const fn = this.function.fn;
    // A run's events are idempotent, so Lambda's retries of a failed run are safe; one older than an
    // interval is worth nothing (the next run is as good) and goes to the dead-letter queue instead.
    fn.configureAsyncInvoke({ maxEventAge: Duration.minutes(RECONCILE_INTERVAL_MINUTES) });
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['secretsmanager:GetSecretValue'],
        resources: [props.stripeSecret.secretArn],
      }),
    );
    // The webhook's writes (lib/infra/payments.ts says which call needs which), and its checkpoint: a
    // GetItem and a PutItem of one ledger item (functions/reconciler/checkpoint.ts).
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:PutItem'],
        resources: [tables.ledger.tableArn],
      }),
    );
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:UpdateItem'],
        resources: [tables.accounts.tableArn],
      }),
    );
    fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:PutItem'], resources: [tables.holds.tableArn] }),
    );
    // The audit entries of what it applies (as the webhook's): a Put in the transaction of the change.
    fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:PutItem'], resources: [tables.audit.tableArn] }),
    );
    // The watch items, as the webhook writes them: a saved card, an auto top-up's in-flight mark
    // cleared, or auto top-up switched off with its e-mail queued (a transaction's Update and Put).
    if (props.dashboard)
      fn.addToRolePolicy(
        new PolicyStatement({
          actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem'],
          resources: [props.dashboard.table.tableArn],
        }),
      );

    // Every RECONCILE_INTERVAL_MINUTES (functions/reconciler/schedule.ts says why), by EventBridge
    // Scheduler with a role of its own that may invoke this function (its unqualified ARN: no version
    // or alias wildcard, which the L2 target's grant would add) and send to its dead-letter queue.
    // Scheduler makes no retry of its own (Lambda's asynchronous invocation retries a failed run) and
    // drops an invocation it could not make within an interval into the same queue.
    const schedulerRole = new Role(scope, 'PaymentsReconcilerScheduleRole', {
      assumedBy: new ServicePrincipal('scheduler.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': Stack.of(scope).account } },
      }),
      inlinePolicies: {
        invoke: new PolicyDocument({
          statements: [
            new PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [fn.functionArn] }),
            new PolicyStatement({ actions: ['sqs:SendMessage'], resources: [this.failures.queueArn] }),
          ],
        }),
      },
    });
    new CfnSchedule(scope, 'PaymentsReconcilerSchedule', {
      description: 'Apply the Stripe events the payments webhook did not get',
      scheduleExpression: `rate(${RECONCILE_INTERVAL_MINUTES} minutes)`,
      flexibleTimeWindow: { mode: 'OFF' },
      target: {
        arn: fn.functionArn,
        roleArn: schedulerRole.roleArn,
        deadLetterConfig: { arn: this.failures.queueArn },
        retryPolicy: { maximumRetryAttempts: 0, maximumEventAgeInSeconds: RECONCILE_INTERVAL_MINUTES * 60 },
      },
    });

    const action = new SnsAction(props.alarmTopic);
    const serviceMetric = (metricName: string, period: Duration) =>
      new Metric({
        namespace: SERVICE_NAMESPACE,
        metricName,
        dimensionsMap: { ...SERVICE_DIMENSIONS },
        statistic: 'Sum',
        period,
      });
    const alarms = [
      new Alarm(scope, 'PaymentsReconcilerErrors', {
        metric: fn.metricErrors({ period: Duration.minutes(RECONCILE_INTERVAL_MINUTES), statistic: 'Sum' }),
        threshold: 1,
        evaluationPeriods: 1,
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
        alarmDescription:
          'The payments reconciler failed: an event it could not apply (or Stripe unreachable) is tried again next run; its log says which',
      }),
      new Alarm(scope, 'PaymentsReconcilerFailedEvents', {
        metric: this.failures.metricApproximateNumberOfMessagesVisible({
          period: Duration.minutes(5),
          statistic: 'Maximum',
        }),
        threshold: 1,
        evaluationPeriods: 1,
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
        alarmDescription:
          "A payments reconciler run failed after Lambda's retries, or could not be invoked: its event is in the reconciler's dead-letter queue",
      }),
      new Alarm(scope, 'PaymentsReconcilerStopped', {
        metric: serviceMetric(RECONCILER_METRICS.runs, NOT_RUNNING_AFTER),
        threshold: 1,
        evaluationPeriods: 1,
        comparisonOperator: ComparisonOperator.LESS_THAN_THRESHOLD,
        treatMissingData: TreatMissingData.BREACHING,
        alarmDescription:
          'No payments reconciler run finished in an hour: a payment the webhook misses stays uncredited until it runs (Stripe keeps events 30 days)',
      }),
      new Alarm(scope, 'PaymentsReconciled', {
        metric: serviceMetric(RECONCILER_METRICS.reconciled, Duration.minutes(RECONCILE_INTERVAL_MINUTES)),
        threshold: 1,
        evaluationPeriods: 1,
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
        alarmDescription:
          'The reconciler (or the balance watch) applied a Stripe event the webhook had not: the webhook is missing events (its secret, its deploy, its concurrency); the reconciler log names them',
      }),
    ];
    for (const alarm of alarms) alarm.addAlarmAction(action);
  }
}
