import { Duration, Stack } from 'aws-cdk-lib';
import type { IBackupVault } from 'aws-cdk-lib/aws-backup';
import { CfnBudget } from 'aws-cdk-lib/aws-budgets';
import {
  Alarm,
  ComparisonOperator,
  Dashboard,
  GraphWidget,
  type IMetric,
  MathExpression,
  Metric,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import { Rule } from 'aws-cdk-lib/aws-events';
import { SnsTopic } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import type { ILogGroup } from 'aws-cdk-lib/aws-logs';
import { type ITopic, Topic } from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { BALANCE_CHECK_INTERVAL_MINUTES } from '../../functions/sweeper/schedule.js';
import { AUDIT_TABLE, DASHBOARD_TABLE, TABLES, type TableDefinition, TEAM_TABLE } from '../tables.js';
import { BILLED_SEARCH } from './generation-metrics.js';

/**
 * Every DynamoDB operation the service calls (functions, sweeper, operator CLI): each table's
 * system-errors alarm sums SystemErrors over these, as DynamoDB publishes it per TableName and
 * Operation (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/metrics-dimensions.html).
 */
export const DYNAMODB_OPERATIONS = [
  'GetItem',
  'BatchGetItem',
  'PutItem',
  'UpdateItem',
  'DeleteItem',
  'Query',
  'Scan',
  'TransactWriteItems',
] as const;

/** The service's own metrics (EMF, functions/shared/observability.ts): one dimension, the service. */
export const SERVICE_NAMESPACE = 'HostedModelApi';
export const SERVICE_DIMENSIONS = { service: 'hosted-model-api' } as const;

/** A metric the service emits itself, with the dimensions it emits it with. */
const serviceMetric = (metricName: string, statistic = 'Sum', period = Duration.minutes(5)) =>
  new Metric({
    namespace: SERVICE_NAMESPACE,
    metricName,
    dimensionsMap: { ...SERVICE_DIMENSIONS },
    statistic,
    period,
  });

/** A function URL's count (UrlRequestCount, Url4xxCount, Url5xxCount), AWS/Lambda by FunctionName, per 5 minutes. */
const functionUrlMetric = (fn: IFunction, metricName: string) =>
  new Metric({
    namespace: 'AWS/Lambda',
    metricName,
    dimensionsMap: { FunctionName: fn.functionName },
    statistic: 'Sum',
    period: Duration.minutes(5),
  });

export interface AlarmsProps {
  /** Alarm notifications go to this address, or to this existing SNS topic. */
  alarmEmail?: string;
  alarmTopicArn?: string;
  /** A monthly AWS Budgets limit in USD, notifying the alarm topic at 80% of actual spend. */
  monthlyBudgetUsd?: number;
  /** The completions function's reserved concurrency: an alarm at 80% of it. */
  reservedConcurrency?: number;
  /** The overdraft bound's concurrency when nothing is reserved (MAX_CONCURRENCY): an alarm at 80% of it. */
  maxConcurrency?: number;
  completions: IFunction;
  models: IFunction;
  sweeper: IFunction;
  /** Stripe's webhook (payments.ts). */
  payments: IFunction;
  /** The customers' dashboard (dashboard.ts), where it is deployed (a stack with a custom domain). */
  dashboard?: IFunction;
  /** Where the sweeper's failed asynchronous invocations land. */
  sweeperFailures: IQueue;
  /** Where the logged-usage function's failed deliveries land (after Lambda's retries). */
  loggedUsageFailures: IQueue;
  /** The logged-usage function, and the log group whose subscription filter delivers it the usage lines. */
  loggedUsage: IFunction;
  usageLines: ILogGroup;
  /** The vault of the tables' daily backups (prod only): a backup job that fails notifies the topic. */
  backupVault?: IBackupVault;
  tables: {
    keys: TableV2;
    accounts: TableV2;
    ledger: TableV2;
    holds: TableV2;
    team: TableV2;
    audit: TableV2;
  };
  /** The dashboard's table (sessions, user links), where the dashboard is deployed: alarmed as the others. */
  dashboardTable?: TableV2;
}

/**
 * The alarms (docs/operations.md, alarm table), the budget, the dashboard, and in prod a rule that
 * passes AWS Backup's failed jobs on to the alarm topic. Each alarm reads a metric AWS publishes with
 * exactly the dimensions given (test/infra/alarm-metrics.test.ts checks every one against AWS's
 * documentation), or one the service emits itself.
 */
export class Alarms extends Construct {
  readonly topic: ITopic;

  constructor(scope: Construct, id: string, props: AlarmsProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const { completions, models, sweeper, tables } = props;
    // The construct id stays 'Alarms' at the stack's top level: the topic's logical id is unchanged.
    const topic = props.alarmTopicArn
      ? Topic.fromTopicArn(stack, 'Alarms', props.alarmTopicArn)
      : new Topic(stack, 'Alarms', { enforceSSL: true });
    if (props.alarmEmail && !props.alarmTopicArn)
      topic.addSubscription(new EmailSubscription(props.alarmEmail));
    if (topic instanceof Topic) {
      // enforceSSL makes CDK write the topic's policy (AWS::SNS::TopicPolicy), which replaces SNS's
      // default one: a service publishes only with a statement of its own. CloudWatch, for the alarms'
      // actions, scoped to this account's alarms in this region (Amazon SNS developer guide, "Amazon SNS
      // access control case examples"; without it every alarm's notification is refused).
      topic.addToResourcePolicy(
        new PolicyStatement({
          sid: 'CloudWatchAlarmsPublish',
          principals: [new ServicePrincipal('cloudwatch.amazonaws.com')],
          actions: ['SNS:Publish'],
          resources: [topic.topicArn],
          conditions: {
            StringEquals: { 'aws:SourceAccount': stack.account },
            ArnLike: {
              'aws:SourceArn': `arn:${stack.partition}:cloudwatch:${stack.region}:${stack.account}:alarm:*`,
            },
          },
        }),
      );
    }
    this.topic = topic;
    const action = new SnsAction(topic);
    const alarm = (alarmId: string, metric: IMetric, threshold: number, description: string) => {
      const created = new Alarm(stack, alarmId, {
        metric,
        threshold,
        evaluationPeriods: 1,
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
        alarmDescription: description,
      });
      created.addAlarmAction(action);
      return created;
    };
    const minute = Duration.minutes(1);
    for (const [name, fn] of [
      ['Completions', completions],
      ['Models', models],
    ] as const) {
      alarm(
        `${name}Errors`,
        fn.metricErrors({ period: minute, statistic: 'Sum' }),
        1,
        `${name} function errors`,
      );
      alarm(
        `${name}Throttles`,
        fn.metricThrottles({ period: minute, statistic: 'Sum' }),
        1,
        `${name} function throttled`,
      );
      alarm(
        `${name}5xxRate`,
        new MathExpression({
          expression: 'IF(requests > 0, 100 * errors / requests, 0)',
          usingMetrics: {
            errors: functionUrlMetric(fn, 'Url5xxCount'),
            requests: functionUrlMetric(fn, 'UrlRequestCount'),
          },
          period: Duration.minutes(5),
          label: `${name} 5xx rate (%)`,
        }),
        5,
        `${name}: more than 5% of requests answered 5xx`,
      );
    }
    // Stripe's webhook (functions/payments/metrics.ts names the metrics): a failed event is sent again by
    // Stripe for three days, but only a fix makes it land; a dispute or a payment naming no account is
    // for an operator to act on; many bad signatures are a misconfigured secret or someone probing.
    alarm(
      'PaymentsErrors',
      props.payments.metricErrors({ period: minute, statistic: 'Sum' }),
      1,
      'Payments (Stripe webhook) function errors',
    );
    alarm(
      'PaymentsWebhookFailures',
      serviceMetric('PaymentsWebhookFailures', 'Sum', minute),
      1,
      'A Stripe event could not be applied (answered 500; Stripe sends it again): the payments log says why',
    );
    alarm(
      'PaymentsSignatureFailures',
      serviceMetric('PaymentsSignatureFailures'),
      5,
      'Requests to the Stripe webhook without a valid signature: the webhook secret, or someone probing',
    );
    alarm(
      'PaymentsUnknownAccounts',
      serviceMetric('PaymentsUnknownAccounts', 'Sum', minute),
      1,
      'A Stripe payment named no account of ours (or another currency): nothing was credited; the payments log names it',
    );
    alarm(
      'PaymentsDisputes',
      serviceMetric('PaymentsDisputes', 'Sum', minute),
      1,
      'A payment is disputed: its amount was taken back and the account suspended until an operator acts',
    );
    // The dashboard: a function error is a page a customer did not get (sign-in, a key, a checkout).
    if (props.dashboard)
      alarm(
        'DashboardErrors',
        props.dashboard.metricErrors({ period: minute, statistic: 'Sum' }),
        1,
        'Dashboard function errors: a customer did not get a page (its log says which and why)',
      );
    alarm(
      'BillingFailures',
      serviceMetric('BillingFailures', 'Sum', minute),
      1,
      'A generation could not be billed: its usage record is in the completions log ("billing failed")',
    );
    alarm(
      'HoldSweeperErrors',
      sweeper.metricErrors({ period: Duration.minutes(5), statistic: 'Sum' }),
      1,
      'The hold sweeper failed: expired holds keep credit held until it runs again',
    );
    alarm(
      'HoldSweeperFailedEvents',
      props.sweeperFailures.metricApproximateNumberOfMessagesVisible({
        period: Duration.minutes(5),
        statistic: 'Maximum',
      }),
      1,
      "A sweep or balance check failed after Lambda's retries: its event is in the sweeper's dead-letter queue",
    );
    alarm(
      'LoggedUsageFailedEvents',
      props.loggedUsageFailures.metricApproximateNumberOfMessagesVisible({
        period: Duration.minutes(5),
        statistic: 'Maximum',
      }),
      1,
      "A batch of usage lines failed after Lambda's retries (in the logged-usage dead-letter queue): bill its lines with admin bill-logged",
    );
    // CloudWatch Logs' delivery of the usage lines to the logged-usage function (the subscription filter):
    // AWS/Logs publishes DeliveryErrors and DeliveryThrottling with LogGroupName among their dimensions
    // (CloudWatch Logs user guide, "Monitoring with CloudWatch metrics"); the completions log group has
    // this one subscription filter, so the log group's count is the filter's.
    for (const [metricName, what] of [
      ['DeliveryErrors', 'received an error from'],
      ['DeliveryThrottling', 'was throttled by'],
    ] as const) {
      alarm(
        `UsageLines${metricName}`,
        new Metric({
          namespace: 'AWS/Logs',
          metricName,
          dimensionsMap: { LogGroupName: props.usageLines.logGroupName },
          statistic: 'Sum',
          period: Duration.minutes(5),
        }),
        1,
        `CloudWatch Logs ${what} the logged-usage function delivering usage lines: those generations are billed only by admin bill-logged`,
      );
    }
    // The logged-usage function's asynchronous queue: an event dropped (too old, or out of retries) goes to
    // its dead-letter queue, and DeadLetterErrors counts those the queue refused: lost events
    // (Lambda developer guide, "Types of metrics for Lambda functions"; AWS/Lambda by FunctionName).
    alarm(
      'LoggedUsageEventsDropped',
      props.loggedUsage.metric('AsyncEventsDropped', { period: Duration.minutes(5), statistic: 'Sum' }),
      1,
      "Lambda dropped a batch of usage lines without running the logged-usage function (too old, out of retries, or the function's concurrency at 0): it is in the LoggedUsageFailures queue unless LoggedUsageDeadLetterErrors fired too",
    );
    alarm(
      'LoggedUsageDeadLetterErrors',
      props.loggedUsage.metric('DeadLetterErrors', { period: Duration.minutes(5), statistic: 'Sum' }),
      1,
      'A failed batch of usage lines could not be sent to the LoggedUsageFailures queue: it is lost; bill its lines from the completions log with admin bill-logged',
    );
    alarm(
      'LoggedGenerationsBilled',
      serviceMetric('LoggedGenerationsBilled', 'Sum', Duration.minutes(5)),
      1,
      'A generation was billed from its usage line: its completions function died (or stalled) before settling it',
    );
    alarm(
      'LoggedUsageUnreadable',
      serviceMetric('LoggedUsageUnreadable', 'Sum', Duration.minutes(5)),
      1,
      'A usage line delivered to the logged-usage function could not be read: its generation is not billed',
    );
    alarm(
      'ExpiredHoldsReleased',
      serviceMetric('ExpiredHoldsReleased', 'Sum', Duration.minutes(5)),
      1,
      'A hold expired and was released: its request was never billed (its log line names the generation)',
    );
    // As the completions function emits it (EMF, like BillingFailures): a held request's usage record
    // could not be written onto its hold, so only the log line keeps it if the function dies.
    alarm(
      'UsageRecordFailures',
      serviceMetric('UsageRecordFailures', 'Sum', minute),
      1,
      'A held request\'s usage record could not be written onto its hold: should its function die before settling, only its completions log line ("generation usage") bills it',
    );
    alarm(
      'UsageOutOfBounds',
      serviceMetric('UsageOutOfBounds', 'Sum', minute),
      1,
      'An upstream reported usage beyond what the request could use; it was billed at the bound. The raw report is in the completions log ("upstream usage out of bounds")',
    );
    // As recordOriginRefused (functions/shared/observability.ts) publishes it: Powertools' EMF with
    // the one default dimension, service.
    alarm(
      'OriginRefused',
      serviceMetric('OriginRefused', 'Sum', Duration.minutes(5)),
      1,
      'A request reached a function without the origin secret: a Function URL called directly, past CloudFront and WAF, or CloudFront sending a secret the functions no longer accept (docs/deploy.md, "Rotating the origin secret")',
    );
    // The sweeper's heartbeat: no successful sweep in 5 minutes (missing data breaches) leaves
    // expired holds holding credit.
    const sweeps = serviceMetric('SweeperRuns', 'Sum', Duration.minutes(5));
    const stalled = new Alarm(stack, 'SweeperStopped', {
      metric: sweeps,
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.LESS_THAN_THRESHOLD,
      treatMissingData: TreatMissingData.BREACHING,
      alarmDescription: 'No hold sweep succeeded in 5 minutes: expired holds keep credit held',
    });
    stalled.addAlarmAction(action);
    const negative = serviceMetric(
      'NegativeBalanceAccounts',
      'Maximum',
      Duration.minutes(BALANCE_CHECK_INTERVAL_MINUTES),
    );
    alarm(
      'NegativeBalances',
      negative,
      1,
      'An account is below zero: the overdraft bound allows one bill plus its unheld requests in flight (docs/billing.md); look at its ledger',
    );
    const alarmedTables: [string, TableV2, TableDefinition][] = [
      ['Keys', tables.keys, TABLES.keys],
      ['Accounts', tables.accounts, TABLES.accounts],
      ['Ledger', tables.ledger, TABLES.ledger],
      ['Holds', tables.holds, TABLES.holds],
      ['Team', tables.team, TEAM_TABLE],
      ['Audit', tables.audit, AUDIT_TABLE],
      ...(props.dashboardTable
        ? [['Dashboard', props.dashboardTable, DASHBOARD_TABLE] as [string, TableV2, TableDefinition]]
        : []),
    ];
    for (const [name, table, definition] of alarmedTables) {
      const dynamo = (metricName: string, dimensionsMap: Record<string, string>) =>
        new Metric({
          namespace: 'AWS/DynamoDB',
          metricName,
          dimensionsMap,
          statistic: 'Sum',
          period: minute,
        });
      // Throttle events: DynamoDB publishes them per TableName for the table, and per TableName and
      // GlobalSecondaryIndexName for each index (an index's throttles are not in the table's).
      const scopes: Record<string, string>[] = [
        { TableName: table.tableName },
        ...definition.indexes.map((index) => ({
          TableName: table.tableName,
          GlobalSecondaryIndexName: index.name,
        })),
      ];
      const throttles: Record<string, IMetric> = {};
      scopes.forEach((dimensions, i) => {
        throttles[`read${i}`] = dynamo('ReadThrottleEvents', dimensions);
        throttles[`write${i}`] = dynamo('WriteThrottleEvents', dimensions);
      });
      alarm(
        `${name}TableThrottles`,
        new MathExpression({
          expression: 'SUM(METRICS())',
          usingMetrics: throttles,
          period: minute,
          label: `${name} throttle events`,
        }),
        1,
        `DynamoDB throttled reads or writes on the ${name.toLowerCase()} table or its indexes`,
      );
      alarm(
        `${name}TableSystemErrors`,
        new MathExpression({
          expression: 'SUM(METRICS())',
          usingMetrics: Object.fromEntries(
            DYNAMODB_OPERATIONS.map((op) => [
              op.toLowerCase(),
              dynamo('SystemErrors', { TableName: table.tableName, Operation: op }),
            ]),
          ),
          period: minute,
          label: `${name} system errors`,
        }),
        1,
        `DynamoDB system errors (5xx) on the ${name.toLowerCase()} table`,
      );
    }
    this.addDashboard(completions, models, sweeps, negative);
    if (props.monthlyBudgetUsd !== undefined) {
      if (topic instanceof Topic) {
        // AWS Budgets publishes only with the topic's permission, scoped to this account's budgets
        // (https://docs.aws.amazon.com/cost-management/latest/userguide/budgets-sns-policy.html).
        topic.addToResourcePolicy(
          new PolicyStatement({
            sid: 'AWSBudgetsPublish',
            principals: [new ServicePrincipal('budgets.amazonaws.com')],
            actions: ['SNS:Publish'],
            resources: [topic.topicArn],
            conditions: {
              StringEquals: { 'aws:SourceAccount': stack.account },
              ArnLike: { 'aws:SourceArn': `arn:${stack.partition}:budgets::${stack.account}:*` },
            },
          }),
        );
      }
      new CfnBudget(stack, 'MonthlyBudget', {
        budget: {
          budgetType: 'COST',
          timeUnit: 'MONTHLY',
          budgetLimit: { amount: props.monthlyBudgetUsd, unit: 'USD' },
        },
        notificationsWithSubscribers: [
          {
            notification: {
              notificationType: 'ACTUAL',
              comparisonOperator: 'GREATER_THAN',
              threshold: 80,
              thresholdType: 'PERCENTAGE',
            },
            subscribers: [{ subscriptionType: 'SNS', address: topic.topicArn }],
          },
        ],
      });
    }
    // The completions ceiling: its reservation (near it, requests throttle with Lambda's 429), or, with
    // nothing reserved, the concurrency the overdraft bound counts on (MAX_CONCURRENCY: above it, the
    // bound no longer holds). Raise it, or find who floods.
    const ceiling = props.reservedConcurrency ?? props.maxConcurrency;
    if (ceiling !== undefined) {
      alarm(
        'CompletionsConcurrencyNearLimit',
        completions.metric('ConcurrentExecutions', { period: minute, statistic: 'Maximum' }),
        Math.ceil(ceiling * 0.8),
        props.reservedConcurrency !== undefined
          ? `Completions at 80% of its reserved concurrency (${ceiling})`
          : `Completions at 80% of maxConcurrency (${ceiling}), the concurrency the overdraft bound counts on`,
      );
    }
    if (props.backupVault) {
      // AWS Backup's own account of a job: it sends "Backup Job State Change" events to EventBridge (AWS
      // Backup developer guide, "Monitoring AWS Backup events using Amazon EventBridge": "you can receive
      // an alarm when a backup job fails"). A rule on this vault's jobs that end FAILED, ABORTED or
      // EXPIRED sends the event itself to the topic, with an execution role of its own (an SNS target takes
      // one: EventBridge user guide, "Using resource-based policies for Amazon EventBridge"), so an existing
      // topic (alarmTopicArn) needs no statement for EventBridge. Chosen over a CloudWatch alarm on
      // AWS/Backup's NumberOfBackupJobsFailed, whose dimension sets that guide does not spell out.
      new Rule(stack, 'BackupJobFailed', {
        description: 'A backup job of the tables failed, was aborted or expired',
        eventPattern: {
          source: ['aws.backup'],
          detailType: ['Backup Job State Change'],
          detail: {
            state: ['FAILED', 'ABORTED', 'EXPIRED'],
            backupVaultName: [props.backupVault.backupVaultName],
          },
        },
        targets: [new SnsTopic(topic, { authorizeUsingRole: true })],
      });
    }
  }

  /** One dashboard: requests, errors, latency, billed amount, holds, sweeps and the money invariants. */
  private addDashboard(completions: IFunction, models: IFunction, sweeps: Metric, negative: Metric): void {
    new Dashboard(Stack.of(this), 'Dashboard', {
      widgets: [
        [
          new GraphWidget({
            title: 'Requests',
            left: [
              functionUrlMetric(completions, 'UrlRequestCount'),
              functionUrlMetric(models, 'UrlRequestCount'),
            ],
          }),
          new GraphWidget({
            title: 'Errors (4xx, 5xx, function errors)',
            left: [
              functionUrlMetric(completions, 'Url4xxCount'),
              functionUrlMetric(completions, 'Url5xxCount'),
              functionUrlMetric(models, 'Url5xxCount'),
            ],
            right: [completions.metricErrors(), models.metricErrors()],
          }),
          new GraphWidget({
            title: 'Latency (ms)',
            left: [
              completions.metricDuration({ statistic: 'p50' }),
              completions.metricDuration({ statistic: 'p99' }),
              models.metricDuration({ statistic: 'p99' }),
            ],
          }),
        ],
        [
          // Read per tier from the usage lines (generation-metrics.ts): the search sums every tier's.
          new GraphWidget({
            title: 'Billed (micro-USD)',
            left: [
              new MathExpression({
                expression: `SUM(SEARCH('${BILLED_SEARCH}', 'Sum', 300))`,
                label: 'Billed, all tiers',
                period: Duration.minutes(5),
              }),
            ],
          }),
          new GraphWidget({
            title: 'Holds, sweeps and accounts below zero',
            left: [serviceMetric('ExpiredHoldsReleased'), sweeps],
            right: [negative],
          }),
          new GraphWidget({
            title: 'Money alarms: billing failures, usage out of bounds',
            left: [serviceMetric('BillingFailures'), serviceMetric('UsageOutOfBounds')],
          }),
        ],
      ],
    });
  }
}
