/**
 * The balance watch (functions/balance-watch/): a function that sends the low-balance e-mails (Amazon
 * SES v2 SendEmail) and starts the auto top-ups (Stripe, off-session), invoked by the accounts table's
 * stream where a balance crossed a level (an event source mapping whose filters pass only the items
 * below their copied levels, and those back above them), by an hourly EventBridge Scheduler schedule
 * (the safety sweep) and by one every few minutes (the outbox); with exactly the grants its code
 * needs, alarms on its errors, on its schedules not running and on the stream falling behind, and
 * what the payments and dashboard functions need beside it (the watch items of the dashboard table;
 * the dashboard's copy of the levels onto the account items). Deployed with the dashboard only (a stack with a custom domain): its settings are the
 * dashboard's, and its items live in the dashboard's table.
 *
 * The sender and its SES identity, configuration set and grant are the stack's e-mail (email.ts): the
 * role may send only from that address (`ses:FromAddress`), through exactly what SES checks.
 */
import { Duration, type RemovalPolicy, Stack } from 'aws-cdk-lib';
import { Alarm, ComparisonOperator, Metric, TreatMissingData } from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyDocument, PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import {
  EventSourceMapping,
  type Function as LambdaFunctionResource,
  StartingPosition,
} from 'aws-cdk-lib/aws-lambda';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { CfnSchedule } from 'aws-cdk-lib/aws-scheduler';
import type { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import {
  WATCH_OUTBOX_INTERVAL_MINUTES,
  WATCH_SWEEP_INTERVAL_MINUTES,
} from '../../functions/balance-watch/schedule.js';
import { STREAM_FILTERS } from '../../functions/balance-watch/stream.js';
import { DASHBOARD_TABLE_ENV, INDEX } from '../tables.js';
import { SERVICE_DIMENSIONS, SERVICE_NAMESPACE } from './alarms.js';
import type { EmailSending } from './email.js';
import { ServiceFunction } from './service-function.js';

/**
 * Its timeout and memory: a stream batch is a few accounts, a read and a write or two each, an e-mail
 * or a Stripe call; the sweep starts accounts for SWEEP_BUDGET_MS (4 minutes) and then saves its place.
 */
const BALANCE_WATCH_SETTINGS = { timeoutSeconds: 300, memoryMb: 256 } as const;

/** A metric the service emits itself (EMF, functions/shared/observability.ts), summed over `period`. */
const serviceMetric = (metricName: string, period = Duration.minutes(5)) =>
  new Metric({
    namespace: SERVICE_NAMESPACE,
    metricName,
    dimensionsMap: { ...SERVICE_DIMENSIONS },
    statistic: 'Sum',
    period,
  });

export interface BalanceWatchProps {
  tables: { accounts: TableV2; ledger: TableV2; holds: TableV2; audit: TableV2 };
  /** The dashboard's table: the watch items live there (functions/adapters/dynamodb/watch.ts). */
  dashboardTable: TableV2;
  tableEnv: Record<string, string>;
  stripeSecret: Secret;
  /** The dashboard's billing page, linked from the e-mails. */
  billingUrl: string;
  /** The stack's e-mail: the sender, its identity and the grant to send as it. */
  email: EmailSending;
  /** The payments function: records a saved card and an auto top-up's outcome on the watch items. */
  payments: LambdaFunctionResource;
  /** The dashboard function: saves the settings and the signed-in user's e-mail address. */
  dashboard: LambdaFunctionResource;
  alarmTopic: ITopic;
  logRetention: RetentionDays;
  removalPolicy: RemovalPolicy;
}

export class BalanceWatch extends Construct {
  readonly function: ServiceFunction;
  readonly sender: string;

  constructor(scope: Construct, id: string, props: BalanceWatchProps) {
    super(scope, id);
    this.sender = props.email.sender;
    const table = props.dashboardTable;
    const watchEnv = { [DASHBOARD_TABLE_ENV]: table.tableName, BILLING_URL: props.billingUrl };

    this.function = new ServiceFunction(scope, 'BalanceWatch', {
      entry: 'functions/balance-watch/handler.ts',
      memorySize: BALANCE_WATCH_SETTINGS.memoryMb,
      timeout: Duration.seconds(BALANCE_WATCH_SETTINGS.timeoutSeconds),
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
      environment: {
        ...props.tableEnv,
        ...watchEnv,
        ALERT_SENDER: this.sender,
        STRIPE_SECRET_ARN: props.stripeSecret.secretArn,
      },
    });
    const fn = this.function.fn;
    // Exactly what its code does (the local IAM layer holds test/integration/balance-watch.test.ts to it):
    // - the watch and outbox items: listed (a page at a time) by the sparse index, read (an account a
    //   stream batch names, the sweep's place), updated (each transition, a claim, the sweep's place),
    //   an outbox item put in a transition's transaction and deleted once sent;
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:Query'],
        resources: [`${table.tableArn}/index/${INDEX.watchList}`],
      }),
    );
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem', 'dynamodb:DeleteItem'],
        resources: [table.tableArn],
      }),
    );
    // - the balance: one snapshot of the account's slices (GetItem, TransactGetItems' Gets);
    fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:GetItem'], resources: [props.tables.accounts.tableArn] }),
    );
    // - an auto top-up whose outcome's event was lost, applied as the webhook would
    //   (functions/balance-watch/lookup.ts): the top-up's ledger entry and balance (a transaction's Put
    //   and Update; on a split account a transfer item; a switch-off is the watch item's update above);
    fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:PutItem'], resources: [props.tables.ledger.tableArn] }),
    );
    fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:UpdateItem'], resources: [props.tables.accounts.tableArn] }),
    );
    fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:PutItem'], resources: [props.tables.holds.tableArn] }),
    );
    //   and its purchase's audit entry (actor Stripe), a Put in the same transaction as the credit;
    fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:PutItem'], resources: [props.tables.audit.tableArn] }),
    );
    // - Stripe's key (the off-session PaymentIntent), as the payments function reads it;
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['secretsmanager:GetSecretValue'],
        resources: [props.stripeSecret.secretArn],
      }),
    );
    // - SES: SendEmail as the sender only, on what SES checks (email.ts).
    props.email.grantSend(fn);

    // - the accounts table's stream, as the event source mapping reads it with this role. Lambda checks
    //   all four when the mapping is made (CreateEventSourceMapping answers "Please ensure the role can
    //   perform the GetRecords, GetShardIterator, DescribeStream, and ListStreams Actions on your
    //   stream" otherwise), so ListStreams is here too, on the stream's ARN as CDK's grantStreamRead
    //   grants it.
    const streamArn = props.tables.accounts.tableStreamArn;
    if (!streamArn) throw new Error('the balance watch needs the accounts table with its stream');
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: [
          'dynamodb:DescribeStream',
          'dynamodb:GetShardIterator',
          'dynamodb:GetRecords',
          'dynamodb:ListStreams',
        ],
        resources: [streamArn],
      }),
    );
    // Where a balance crosses a level: only the records STREAM_FILTERS pass invoke it, in batches;
    // a failed batch is tried again (halved, to pass the accounts that did not fail), then left to the
    // safety sweep (a record an hour old is worth no more than the sweep).
    new EventSourceMapping(scope, 'BalanceWatchStream', {
      target: fn,
      eventSourceArn: streamArn,
      startingPosition: StartingPosition.TRIM_HORIZON,
      batchSize: 100,
      maxBatchingWindow: Duration.seconds(5),
      retryAttempts: 3,
      bisectBatchOnError: true,
      maxRecordAge: Duration.hours(1),
      filters: STREAM_FILTERS.map((pattern) => ({ pattern: JSON.stringify(pattern) })),
    });

    // The safety sweep hourly and the outbox every few minutes, by EventBridge Scheduler with a role of
    // its own that may invoke this function (its unqualified ARN) and nothing else; no retry of its
    // own and none of Lambda's (the next run is as good). Two runs at once act once (each transition
    // is a conditional write).
    const schedulerRole = new Role(scope, 'BalanceWatchScheduleRole', {
      assumedBy: new ServicePrincipal('scheduler.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': Stack.of(scope).account } },
      }),
      inlinePolicies: {
        invoke: new PolicyDocument({
          statements: [
            new PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [fn.functionArn] }),
          ],
        }),
      },
    });
    const schedules = [
      ['BalanceWatchSweepSchedule', 'sweep', WATCH_SWEEP_INTERVAL_MINUTES, 'Balance watch: the safety sweep'],
      [
        'BalanceWatchOutboxSchedule',
        'outbox',
        WATCH_OUTBOX_INTERVAL_MINUTES,
        'Balance watch: the e-mails queued',
      ],
    ] as const;
    for (const [id, run, minutes, description] of schedules)
      new CfnSchedule(scope, id, {
        description,
        scheduleExpression: `rate(${minutes} minutes)`,
        flexibleTimeWindow: { mode: 'OFF' },
        target: {
          arn: fn.functionArn,
          roleArn: schedulerRole.roleArn,
          input: JSON.stringify({ run }),
          retryPolicy: { maximumRetryAttempts: 0, maximumEventAgeInSeconds: minutes * 60 },
        },
      });
    fn.configureAsyncInvoke({
      maxEventAge: Duration.minutes(WATCH_OUTBOX_INTERVAL_MINUTES),
      retryAttempts: 0,
    });
    const alarm = new Alarm(scope, 'BalanceWatchErrors', {
      metric: fn.metricErrors({ period: Duration.minutes(5), statistic: 'Sum' }),
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription:
        'The balance watch failed: a low-balance e-mail or an auto top-up waits for the next run (its log says why)',
    });
    alarm.addAlarmAction(new SnsAction(props.alarmTopic));
    // An e-mail taken out of the outbox unsent (functions/balance-watch/watch.ts): SES refused it for
    // good, or it failed a dozen runs. Not a watch error (later runs are clean); its own alarm.
    const deadLettered = new Alarm(scope, 'BalanceWatchEmailsDeadLettered', {
      metric: serviceMetric('EmailsDeadLettered'),
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription:
        'A low-balance or auto-top-up e-mail was not sent and will not be retried (SES refused it, or it failed a dozen runs): its customer was not told. docs/operations.md, "Balance watch"',
    });
    deadLettered.addAlarmAction(new SnsAction(props.alarmTopic));
    // Its heartbeats, as the sweeper's: no scheduled run in 15 minutes (three outbox runs missed), or
    // no sweep in two hours (missing data breaches), is a watch that is not running (a schedule
    // disabled, or every run timing out), which no error alarms; and the stream's records waiting
    // (IteratorAge, the age of the last record a batch read) is one falling behind, or stuck on a batch.
    const notRunning = [
      [
        'BalanceWatchStopped',
        serviceMetric('BalanceWatchRuns', Duration.minutes(3 * WATCH_OUTBOX_INTERVAL_MINUTES)),
        'No balance-watch run finished in 15 minutes: no queued e-mail is being sent, and the safety sweep is not running',
      ],
      [
        'BalanceWatchSweepStopped',
        serviceMetric('BalanceWatchSweeps', Duration.minutes(2 * WATCH_SWEEP_INTERVAL_MINUTES)),
        "No balance-watch safety sweep finished in two hours: a crossing the stream missed, or an auto top-up whose outcome's event was lost, waits",
      ],
    ] as const;
    for (const [id, metric, alarmDescription] of notRunning)
      new Alarm(scope, id, {
        metric,
        threshold: 1,
        evaluationPeriods: 1,
        comparisonOperator: ComparisonOperator.LESS_THAN_THRESHOLD,
        treatMissingData: TreatMissingData.BREACHING,
        alarmDescription,
      }).addAlarmAction(new SnsAction(props.alarmTopic));
    new Alarm(scope, 'BalanceWatchStreamBehind', {
      metric: fn.metric('IteratorAge', { period: Duration.minutes(5), statistic: 'Maximum' }),
      threshold: Duration.minutes(10).toMilliseconds(),
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription:
        "The balance watch is 10 minutes or more behind the accounts table's stream: low-balance e-mails and auto top-ups are late (its errors, its concurrency)",
    }).addAlarmAction(new SnsAction(props.alarmTopic));

    // The payments webhook: a save-card Checkout's card, an auto top-up's success (its in-flight mark
    // cleared) or decline (switched off, an e-mail queued: a transaction's Update and Put).
    props.payments.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem'],
        resources: [table.tableArn],
      }),
    );
    for (const [name, value] of Object.entries(watchEnv)) props.payments.addEnvironment(name, value);
    // The dashboard: the settings (UpdateItem; a change of auto top-up in a transaction with its e-mail's
    // Put), the e-mail of a key created (PutItem) and the signed-in user's address (PutItem, GetItem: it
    // has those on its table already).
    props.dashboard.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:UpdateItem'], resources: [table.tableArn] }),
    );
    // and the settings' levels copied onto the account's items (its slice count read first, then an
    // UpdateItem each: functions/adapters/dynamodb/watch-copy.ts).
    props.dashboard.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
        resources: [props.tables.accounts.tableArn],
      }),
    );
  }
}
