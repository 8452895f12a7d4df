/**
 * The balance watch (functions/balance-watch/): a function run every minute by an EventBridge rule,
 * as the hold sweeper is, that sends the low-balance e-mails (Amazon SES v2 SendEmail) and starts the
 * auto top-ups (Stripe, off-session), with exactly the grants its code needs, an alarm on its errors,
 * and what the payments and dashboard functions need beside it (the watch items of the dashboard
 * table). Deployed with the dashboard only (a stack with a custom domain): its settings are the
 * dashboard's, and its items live in the dashboard's table.
 *
 * The sender and its SES identity, configuration set and grant are the stack's e-mail (email.ts): the
 * role may send only from that address (`ses:FromAddress`), through exactly what SES checks.
 */
import { Duration, type RemovalPolicy } from 'aws-cdk-lib';
import { Alarm, ComparisonOperator, Metric, TreatMissingData } from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { Function as LambdaFunctionResource } from 'aws-cdk-lib/aws-lambda';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { WATCH_INTERVAL_MINUTES } from '../../functions/balance-watch/schedule.js';
import { DASHBOARD_TABLE_ENV, INDEX } from '../tables.js';
import { SERVICE_DIMENSIONS, SERVICE_NAMESPACE } from './alarms.js';
import type { EmailSending } from './email.js';
import { ServiceFunction } from './service-function.js';

/** Its timeout and memory: a page of watch items, a read and a write or two each, an e-mail or a Stripe call. */
const BALANCE_WATCH_SETTINGS = { timeoutSeconds: 60, memoryMb: 256 } as const;

/** A metric the service emits itself (EMF, functions/shared/observability.ts), summed over 5 minutes. */
const serviceMetric = (metricName: string) =>
  new Metric({
    namespace: SERVICE_NAMESPACE,
    metricName,
    dimensionsMap: { ...SERVICE_DIMENSIONS },
    statistic: 'Sum',
    period: Duration.minutes(5),
  });

export interface BalanceWatchProps {
  tables: { accounts: TableV2; ledger: TableV2; holds: TableV2 };
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
    // - the watch and outbox items: listed (whole) by the sparse index, updated (each transition, a
    //   claim), an outbox item put in a transition's transaction and deleted once sent;
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:Query'],
        resources: [`${table.tableArn}/index/${INDEX.watchList}`],
      }),
    );
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:UpdateItem', 'dynamodb:PutItem', 'dynamodb:DeleteItem'],
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
    // - Stripe's key (the off-session PaymentIntent), as the payments function reads it;
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['secretsmanager:GetSecretValue'],
        resources: [props.stripeSecret.secretArn],
      }),
    );
    // - SES: SendEmail as the sender only, on what SES checks (email.ts).
    props.email.grantSend(fn);

    // Every minute, as the sweeper: no retry and no event older than two minutes (the next run is a
    // minute away). Two runs at once act once (each transition is a conditional write).
    new Rule(scope, 'BalanceWatchSchedule', {
      description: 'Low-balance e-mails and auto top-ups',
      schedule: Schedule.rate(Duration.minutes(WATCH_INTERVAL_MINUTES)),
      targets: [new LambdaFunction(fn, { retryAttempts: 0, maxEventAge: Duration.minutes(2) })],
    });
    fn.configureAsyncInvoke({ maxEventAge: Duration.minutes(2), retryAttempts: 0 });
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
    // Its heartbeat, as the sweeper's: no finished run in 5 minutes (missing data breaches) is a watch
    // that is not running (its schedule disabled, or every run timing out), which no error alarms.
    const stopped = new Alarm(scope, 'BalanceWatchStopped', {
      metric: serviceMetric('BalanceWatchRuns'),
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.LESS_THAN_THRESHOLD,
      treatMissingData: TreatMissingData.BREACHING,
      alarmDescription:
        'No balance-watch run finished in 5 minutes: no low-balance e-mail and no auto top-up is being started',
    });
    stopped.addAlarmAction(new SnsAction(props.alarmTopic));

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
  }
}
