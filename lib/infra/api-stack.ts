import { CfnOutput, Duration, RemovalPolicy, SecretValue, Stack, type StackProps } from 'aws-cdk-lib';
import { CfnBudget } from 'aws-cdk-lib/aws-budgets';
import { Certificate } from 'aws-cdk-lib/aws-certificatemanager';
import {
  AllowedMethods,
  CachePolicy,
  Distribution,
  type ErrorResponse,
  FunctionEventType,
  FunctionUrlOriginAccessControl,
  HttpVersion,
  OriginRequestPolicy,
  PriceClass,
  ResponseHeadersPolicy,
  SecurityPolicyProtocol,
  Signing,
  SigningBehavior,
  SigningProtocol,
  ViewerProtocolPolicy,
} from 'aws-cdk-lib/aws-cloudfront';
import { FunctionUrlOrigin, type FunctionUrlOriginProps } from 'aws-cdk-lib/aws-cloudfront-origins';
import {
  Alarm,
  ComparisonOperator,
  Dashboard,
  GraphWidget,
  MathExpression,
  Metric,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import { Rule, RuleTargetInput, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { FunctionUrlAuthType, type IFunction, type IFunctionUrl, InvokeMode } from 'aws-cdk-lib/aws-lambda';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import {
  BlockPublicAccess,
  Bucket,
  BucketEncryption,
  type IBucket,
  ObjectOwnership,
} from 'aws-cdk-lib/aws-s3';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';
import { modelCatalog } from '../../functions/core/catalog.js';
import { parseTierConfig, singleUpstreamConfig } from '../../functions/core/tiers.js';
import { ORIGIN_READ_TIMEOUT_SECONDS } from '../../functions/shared/limits.js';
import { BALANCE_CHECK_INTERVAL_MINUTES, SWEEP_INTERVAL_MINUTES } from '../../functions/sweeper/schedule.js';
import { TABLE_ENV } from '../tables.js';
import { edgeFunction } from './edge-function.js';
import { DEFAULT_FUNCTION, EDGE_BEHAVIOURS, EDGE_ORIGINS, type EdgeFunction } from './edge-routes.js';
import { edgeWebAclArn } from './edge-waf.js';
import { FUNCTION_SETTINGS } from './function-settings.js';
import { addGenerationMetrics, BILLED_SEARCH } from './generation-metrics.js';
import { applyNagSuppressions } from './nag-suppressions.js';
import { ServiceFunction } from './service-function.js';
import { ServiceTables } from './service-tables.js';

export type Stage = 'sandbox' | 'prod';

/** The status codes whose responses CloudFront caches (its error caching minimum TTL applies to these). */
const CLOUDFRONT_CACHEABLE_ERRORS = [400, 403, 404, 405, 414, 416, 500, 501, 502, 503, 504] as const;

/** AWS's default concurrent-execution limit of an account: the fast path's bound without reservedConcurrency. */
const ACCOUNT_CONCURRENCY_DEFAULT = 1_000;

export interface ApiStackProps extends StackProps {
  stage: Stage;
  /** Ceiling on concurrent completions, and so on in-flight spend (README "Balance floor"). */
  reservedConcurrency?: number;
  /** Completions function timeout in seconds (default FUNCTION_SETTINGS.completions). */
  completionsTimeoutSeconds?: number;
  /** Tier routing (TIERS_CONFIG JSON); required in prod, where there is no simulator. */
  tiersConfig?: string;
  /** The 402 body's topUpUrl. */
  topUpUrl?: string;
  /** Alarm notifications go to this address (prod needs it, or alarmTopicArn). */
  alarmEmail?: string;
  /** Alarm notifications go to this existing SNS topic (prod needs it, or alarmEmail). */
  alarmTopicArn?: string;
  /** The origin secret's version CloudFront sends (set to roll a rotation out; default its current value). */
  originSecretVersion?: string;
  /** Cost guardrails: the most request units a second each table may use (on-demand maximum throughput). */
  tableMaxReadUnits?: number;
  tableMaxWriteUnits?: number;
  /** Cost guardrail: a monthly AWS Budgets limit in USD, notifying at 80% of actual spend. */
  monthlyBudgetUsd?: number;
  /** A custom domain (with an ACM certificate in us-east-1) lets CloudFront enforce TLS 1.2. */
  domainName?: string;
  certificateArn?: string;
  /** A WAF web ACL in front of CloudFront (edge-waf.ts): default on in prod, off in the sandbox. */
  waf?: boolean;
  /** Use this CLOUDFRONT-scope web ACL (created in us-east-1) instead of creating one. */
  webAclArn?: string;
  /** WAF's per-IP limit: requests per 5 minutes before an address is answered 429. */
  wafRateLimit?: number;
}

/**
 * The service in AWS: CloudFront as the one base URL in front of two Function
 * URLs, three DynamoDB tables, the upstream-credentials and origin-verify secrets, and alarms.
 */
export class ApiStack extends Stack {
  constructor(scope: Construct, id: string, props: ApiStackProps) {
    super(scope, id, props);
    const sandbox = props.stage === 'sandbox';
    const removalPolicy = sandbox ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN;
    const logRetention = sandbox ? RetentionDays.ONE_WEEK : RetentionDays.THREE_MONTHS;
    if (!sandbox && !props.tiersConfig) {
      throw new Error(
        'the prod stage needs the tier routing (tiersConfig): cdk deploy -c stage=prod -c tiersFile=tiers.json',
      );
    }
    // The overdraft bound (core/holds.ts) counts on knowing how many completions can run at once: the
    // reserved concurrency is that number, and the function's MAX_CONCURRENCY is derived from it.
    if (!sandbox && props.reservedConcurrency === undefined) {
      throw new Error(
        'the prod stage needs -c reservedConcurrency=<n>: the overdraft bound relies on how many completions can run at once',
      );
    }
    if (!sandbox && !props.alarmEmail && !props.alarmTopicArn) {
      throw new Error(
        'the prod stage needs an alarm destination: -c alarmEmail=<address> or -c alarmTopicArn=<arn>',
      );
    }
    if (!sandbox && props.monthlyBudgetUsd === undefined) {
      throw new Error(
        'the prod stage needs a cost guardrail: -c monthlyBudgetUsd=<USD> (an AWS Budgets budget notifying the alarm topic at 80%)',
      );
    }

    const tables = new ServiceTables(this, 'Tables', {
      retain: !sandbox,
      ...(props.tableMaxReadUnits !== undefined ? { maxReadRequestUnits: props.tableMaxReadUnits } : {}),
      ...(props.tableMaxWriteUnits !== undefined ? { maxWriteRequestUnits: props.tableMaxWriteUnits } : {}),
    });
    const upstreamSecret = new Secret(this, 'UpstreamCredentials', {
      description: 'Upstream provider API keys: a JSON object from credential name to key',
      // Created as {} (not a random string): a request before the keys are put answers a 500 naming
      // the missing credential. The template's value never changes, so a deploy keeps the keys put.
      secretObjectValue: {},
      removalPolicy,
    });
    const originSecret = new Secret(this, 'OriginVerify', {
      description:
        'Shared secret CloudFront sends in x-origin-verify; the functions refuse requests without it',
      generateSecretString: { excludePunctuation: true, passwordLength: 48 },
      removalPolicy,
    });
    const tableEnv = {
      [TABLE_ENV.keys]: tables.keys.tableName,
      [TABLE_ENV.accounts]: tables.accounts.tableName,
      [TABLE_ENV.ledger]: tables.ledger.tableName,
      [TABLE_ENV.holds]: tables.holds.tableName,
      ORIGIN_VERIFY_SECRET_ARN: originSecret.secretArn,
    };

    let upstreamEnv: Record<string, string> = props.tiersConfig ? { TIERS_CONFIG: props.tiersConfig } : {};
    if (sandbox) {
      // The sandbox never spends real money: its upstream is the simulator, as its own function.
      const simulator = new ServiceFunction(this, 'Simulator', {
        entry: 'functions/simulator/handler.ts',
        memorySize: FUNCTION_SETTINGS.simulator.memoryMb,
        timeout: Duration.seconds(FUNCTION_SETTINGS.simulator.timeoutSeconds),
        logRetention,
        removalPolicy,
      });
      const simulatorUrl = simulator.fn.addFunctionUrl({
        authType: FunctionUrlAuthType.NONE,
        invokeMode: InvokeMode.RESPONSE_STREAM,
      });
      upstreamEnv = props.tiersConfig ? upstreamEnv : { UPSTREAM_BASE_URL: `${simulatorUrl.url}v1` };
    }

    const completions = new ServiceFunction(this, 'Completions', {
      entry: 'functions/completions/handler.ts',
      memorySize: FUNCTION_SETTINGS.completions.memoryMb,
      timeout: Duration.seconds(
        props.completionsTimeoutSeconds ?? FUNCTION_SETTINGS.completions.timeoutSeconds,
      ),
      ...(props.reservedConcurrency !== undefined
        ? { reservedConcurrentExecutions: props.reservedConcurrency }
        : {}),
      logRetention,
      removalPolicy,
      environment: {
        ...tableEnv,
        ...upstreamEnv,
        UPSTREAM_SECRET_ARN: upstreamSecret.secretArn,
        KEEPALIVE_INTERVAL_MS: '10000',
        // The fast path's bound (core/holds.ts): how many completions can run at once.
        // One value: the reserved concurrency (required in prod); the account's default in the sandbox.
        MAX_CONCURRENCY: String(props.reservedConcurrency ?? ACCOUNT_CONCURRENCY_DEFAULT),
        ...(props.topUpUrl ? { TOP_UP_URL: props.topUpUrl } : {}),
      },
    });
    // Tokens and billed amount by tier, read from the completions log's usage lines.
    addGenerationMetrics(completions, completions.logGroup, 'HostedModelApi');
    const models = new ServiceFunction(this, 'Models', {
      entry: 'functions/account/handler.ts',
      memorySize: FUNCTION_SETTINGS.models.memoryMb,
      timeout: Duration.seconds(FUNCTION_SETTINGS.models.timeoutSeconds),
      logRetention,
      removalPolicy,
      environment: {
        ...tableEnv,
        // What /models states per tier (context length, prices), from the same tier configuration.
        MODELS_CATALOG: JSON.stringify(
          modelCatalog(
            parseTierConfig(
              props.tiersConfig
                ? JSON.parse(props.tiersConfig)
                : singleUpstreamConfig('https://simulator.invalid/v1'),
            ),
          ),
        ),
      },
    });

    // Least privilege: exactly the actions each function's code performs, on exactly its resources.
    const readAuth = new PolicyStatement({
      actions: ['dynamodb:GetItem', 'dynamodb:BatchGetItem'],
      resources: [tables.keys.tableArn, tables.accounts.tableArn],
    });
    const readOriginSecret = new PolicyStatement({
      actions: ['secretsmanager:GetSecretValue'],
      resources: [originSecret.secretArn],
    });
    completions.fn.addToRolePolicy(readAuth);
    completions.fn.addToRolePolicy(readOriginSecret);
    completions.fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:PutItem'], resources: [tables.ledger.tableArn] }),
    );
    completions.fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:UpdateItem'], resources: [tables.accounts.tableArn] }),
    );
    completions.fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:PutItem', 'dynamodb:DeleteItem'],
        resources: [tables.holds.tableArn],
      }),
    );
    completions.fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['secretsmanager:GetSecretValue'],
        resources: [upstreamSecret.secretArn],
      }),
    );
    models.fn.addToRolePolicy(readAuth);
    models.fn.addToRolePolicy(readOriginSecret);
    // GET /api/v1/generation reads one ledger entry of the caller's own account.
    models.fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:GetItem'], resources: [tables.ledger.tableArn] }),
    );

    // The hold sweeper: releases holds whose request died before settling, on a schedule.
    const sweeper = new ServiceFunction(this, 'HoldSweeper', {
      entry: 'functions/sweeper/handler.ts',
      memorySize: FUNCTION_SETTINGS.sweeper.memoryMb,
      timeout: Duration.seconds(FUNCTION_SETTINGS.sweeper.timeoutSeconds),
      logRetention,
      removalPolicy,
      environment: tableEnv,
    });
    sweeper.fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:Scan', 'dynamodb:DeleteItem'],
        resources: [tables.holds.tableArn],
      }),
    );
    sweeper.fn.addToRolePolicy(
      new PolicyStatement({
        // UpdateItem releases a hold's amount; Scan counts the accounts below zero (the balance check).
        actions: ['dynamodb:UpdateItem', 'dynamodb:Scan'],
        resources: [tables.accounts.tableArn],
      }),
    );
    new Rule(this, 'HoldSweep', {
      description: 'Release expired holds',
      schedule: Schedule.rate(Duration.minutes(SWEEP_INTERVAL_MINUTES)),
      targets: [new LambdaFunction(sweeper.fn, { retryAttempts: 0 })],
    });
    new Rule(this, 'BalanceCheck', {
      description: 'Count the accounts below zero (a money invariant)',
      schedule: Schedule.rate(Duration.minutes(BALANCE_CHECK_INTERVAL_MINUTES)),
      targets: [
        new LambdaFunction(sweeper.fn, {
          retryAttempts: 0,
          event: RuleTargetInput.fromObject({ check: 'balances' }),
        }),
      ],
    });

    // Each URL's auth type, and below how CloudFront reaches it, from one table (edge-routes.ts),
    // which the local emulator follows too.
    const completionsUrl = completions.fn.addFunctionUrl({
      authType: FunctionUrlAuthType[EDGE_ORIGINS.completions.urlAuthType],
      invokeMode: InvokeMode.RESPONSE_STREAM,
    });
    const modelsUrl = models.fn.addFunctionUrl({
      authType: FunctionUrlAuthType[EDGE_ORIGINS.models.urlAuthType],
      invokeMode: InvokeMode.BUFFERED,
    });

    const logBucket = new Bucket(this, 'AccessLogs', {
      // CloudFront standard logs are delivered with ACLs.
      objectOwnership: ObjectOwnership.OBJECT_WRITER,
      blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
      encryption: BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      lifecycleRules: [{ expiration: Duration.days(sandbox ? 7 : 90) }],
      removalPolicy,
      autoDeleteObjects: sandbox,
    });

    // Pinned to a version during a rotation (README "Rotating the origin secret"): a changed reference
    // is what makes CloudFormation resolve the new value; an unchanged one is never re-resolved.
    const originValue = props.originSecretVersion
      ? SecretValue.secretsManager(originSecret.secretArn, { versionId: props.originSecretVersion })
      : originSecret.secretValue;
    const originHeaders = { 'x-origin-verify': originValue.unsafeUnwrap() };
    // A request without a well-formed key (401) or with an oversized body (413, which Lambda would
    // refuse with a bare body) is answered in front of the functions.
    const viewerRequest = edgeFunction(this);
    // HSTS (two years, subdomains) and nosniff on every answer, errors and streams included.
    const securityHeaders = new ResponseHeadersPolicy(this, 'SecurityHeaders', {
      comment: 'hosted-model-api: HSTS and nosniff',
      securityHeadersBehavior: {
        strictTransportSecurity: {
          accessControlMaxAge: Duration.days(730),
          includeSubdomains: true,
          override: true,
        },
        contentTypeOptions: { override: true },
      },
    });
    const behaviour = {
      responseHeadersPolicy: securityHeaders,
      functionAssociations: [{ function: viewerRequest, eventType: FunctionEventType.VIEWER_REQUEST }],
      allowedMethods: AllowedMethods.ALLOW_ALL,
      cachePolicy: CachePolicy.CACHING_DISABLED,
      originRequestPolicy: OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
      viewerProtocolPolicy: ViewerProtocolPolicy.HTTPS_ONLY,
      compress: false,
    };
    // CloudFront caches an origin's error response (10 s by default) whatever the cache policy: one
    // account's 403 or a passing 5xx would then be served to other callers. A TTL of 0 for every
    // status CloudFront can cache means each error is the origin's answer to that request. Only the
    // TTL is set, so the origin's own status and body still reach the client.
    const errorResponses: ErrorResponse[] = CLOUDFRONT_CACHEABLE_ERRORS.map((httpStatus) => ({
      httpStatus,
      ttl: Duration.seconds(0),
    }));
    const customDomain =
      props.domainName && props.certificateArn
        ? {
            domainNames: [props.domainName],
            certificate: Certificate.fromCertificateArn(this, 'Certificate', props.certificateArn),
            minimumProtocolVersion: SecurityPolicyProtocol.TLS_V1_2_2021,
          }
        : {};
    const originOf = (fn: EdgeFunction, url: IFunctionUrl, options: FunctionUrlOriginProps = {}) => {
      const setup = EDGE_ORIGINS[fn];
      const props = { ...options, ...(setup.originHeader ? { customHeaders: originHeaders } : {}) };
      if (!setup.originAccessControl) return new FunctionUrlOrigin(url, props);
      const behavior = { always: SigningBehavior.ALWAYS, 'no-override': SigningBehavior.NO_OVERRIDE };
      return FunctionUrlOrigin.withOriginAccessControl(url, {
        ...props,
        originAccessControl: new FunctionUrlOriginAccessControl(this, `${fn}OriginAccess`, {
          signing: new Signing(SigningProtocol.SIGV4, behavior[setup.originAccessControl]),
        }),
      });
    };
    const origins = {
      completions: originOf('completions', completionsUrl, {
        // Before the first byte (a stream's first keep-alive is immediate).
        readTimeout: Duration.seconds(ORIGIN_READ_TIMEOUT_SECONDS),
        keepaliveTimeout: Duration.seconds(60),
      }),
      models: originOf('models', modelsUrl),
    };
    const webAclId = edgeWebAclArn(this, {
      enabled: props.waf ?? !sandbox,
      webAclArn: props.webAclArn,
      rateLimit: props.wafRateLimit,
    });
    const distribution = new Distribution(this, 'Api', {
      comment: `hosted-model-api ${props.stage}`,
      httpVersion: HttpVersion.HTTP2_AND_3,
      priceClass: PriceClass.PRICE_CLASS_100,
      enableLogging: true,
      // Bucket satisfies IBucket; the cast only bridges exactOptionalPropertyTypes in the CDK's typings.
      logBucket: logBucket as unknown as IBucket,
      logFilePrefix: 'cloudfront/',
      ...customDomain,
      ...(webAclId ? { webAclId } : {}),
      errorResponses,
      defaultBehavior: { ...behaviour, origin: origins[DEFAULT_FUNCTION] },
      additionalBehaviors: Object.fromEntries(
        EDGE_BEHAVIOURS.map(({ pathPattern, fn }) => [pathPattern, { ...behaviour, origin: origins[fn] }]),
      ),
    });

    this.addAlarms(props, completions.fn, models.fn, sweeper.fn, tables);

    const baseUrl =
      props.domainName && props.certificateArn
        ? `https://${props.domainName}/api/v1`
        : `https://${distribution.distributionDomainName}/api/v1`;
    new CfnOutput(this, 'BaseUrl', {
      value: baseUrl,
      description: 'What an OpenAI client takes as its base URL',
    });
    new CfnOutput(this, 'KeysTableName', { value: tables.keys.tableName });
    new CfnOutput(this, 'AccountsTableName', { value: tables.accounts.tableName });
    new CfnOutput(this, 'LedgerTableName', { value: tables.ledger.tableName });
    new CfnOutput(this, 'HoldsTableName', { value: tables.holds.tableName });
    new CfnOutput(this, 'UpstreamSecretArn', { value: upstreamSecret.secretArn });
    new CfnOutput(this, 'OriginSecretArn', {
      value: originSecret.secretArn,
      description:
        'The x-origin-verify secret that CloudFront sends and the functions check (rotate it here)',
    });

    applyNagSuppressions(this);
  }

  private addAlarms(
    props: ApiStackProps,
    completions: IFunction,
    models: IFunction,
    sweeper: IFunction,
    tables: ServiceTables,
  ): void {
    const topic = props.alarmTopicArn
      ? Topic.fromTopicArn(this, 'Alarms', props.alarmTopicArn)
      : new Topic(this, 'Alarms', { enforceSSL: true });
    if (props.alarmEmail && !props.alarmTopicArn)
      topic.addSubscription(new EmailSubscription(props.alarmEmail));
    const action = new SnsAction(topic);
    const alarm = (id: string, metric: Metric | MathExpression, threshold: number, description: string) => {
      const created = new Alarm(this, id, {
        metric,
        threshold,
        evaluationPeriods: 1,
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
        alarmDescription: description,
      });
      created.addAlarmAction(action);
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
      const urlMetric = (metricName: string) =>
        new Metric({
          namespace: 'AWS/Lambda',
          metricName,
          dimensionsMap: { FunctionName: fn.functionName },
          statistic: 'Sum',
          period: Duration.minutes(5),
        });
      alarm(
        `${name}5xxRate`,
        new MathExpression({
          expression: 'IF(requests > 0, 100 * errors / requests, 0)',
          usingMetrics: { errors: urlMetric('Url5xxCount'), requests: urlMetric('UrlRequestCount') },
          period: Duration.minutes(5),
          label: `${name} 5xx rate (%)`,
        }),
        5,
        `${name}: more than 5% of requests answered 5xx`,
      );
    }
    alarm(
      'BillingFailures',
      new Metric({
        namespace: 'HostedModelApi',
        metricName: 'BillingFailures',
        dimensionsMap: { service: 'hosted-model-api' },
        statistic: 'Sum',
        period: minute,
      }),
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
      'ExpiredHoldsReleased',
      new Metric({
        namespace: 'HostedModelApi',
        metricName: 'ExpiredHoldsReleased',
        dimensionsMap: { service: 'hosted-model-api' },
        statistic: 'Sum',
        period: Duration.minutes(5),
      }),
      1,
      'A hold expired and was released: its request was never billed (its log line names the generation)',
    );
    alarm(
      'UsageOutOfBounds',
      new Metric({
        namespace: 'HostedModelApi',
        metricName: 'UsageOutOfBounds',
        dimensionsMap: { service: 'hosted-model-api' },
        statistic: 'Sum',
        period: minute,
      }),
      1,
      'An upstream reported usage beyond what the request could use; it was billed at the bound. The raw report is in the completions log ("upstream usage out of bounds")',
    );
    // As recordOriginRefused (functions/shared/observability.ts) publishes it: Powertools' EMF with
    // the one default dimension, service.
    alarm(
      'OriginRefused',
      new Metric({
        namespace: 'HostedModelApi',
        metricName: 'OriginRefused',
        dimensionsMap: { service: 'hosted-model-api' },
        statistic: 'Sum',
        period: Duration.minutes(5),
      }),
      1,
      'A request reached a function without the origin secret: a Function URL called directly, past CloudFront and WAF, or CloudFront sending a secret the functions no longer accept (README "Rotating the origin secret")',
    );
    // The sweeper's heartbeat: no successful sweep in 5 minutes (missing data breaches) leaves
    // expired holds holding credit.
    const sweeps = new Metric({
      namespace: 'HostedModelApi',
      metricName: 'SweeperRuns',
      dimensionsMap: { service: 'hosted-model-api' },
      statistic: 'Sum',
      period: Duration.minutes(5),
    });
    const stalled = new Alarm(this, 'SweeperStopped', {
      metric: sweeps,
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.LESS_THAN_THRESHOLD,
      treatMissingData: TreatMissingData.BREACHING,
      alarmDescription: 'No hold sweep succeeded in 5 minutes: expired holds keep credit held',
    });
    stalled.addAlarmAction(action);
    const negative = new Metric({
      namespace: 'HostedModelApi',
      metricName: 'NegativeBalanceAccounts',
      dimensionsMap: { service: 'hosted-model-api' },
      statistic: 'Maximum',
      period: Duration.minutes(BALANCE_CHECK_INTERVAL_MINUTES),
    });
    alarm(
      'NegativeBalances',
      negative,
      1,
      'An account is below zero: the overdraft bound allows one request each; look at its ledger',
    );
    for (const [name, table] of Object.entries({
      Keys: tables.keys,
      Accounts: tables.accounts,
      Ledger: tables.ledger,
      Holds: tables.holds,
    })) {
      alarm(
        `${name}TableThrottles`,
        new Metric({
          namespace: 'AWS/DynamoDB',
          metricName: 'ThrottledRequests',
          dimensionsMap: { TableName: table.tableName },
          statistic: 'Sum',
          period: minute,
        }),
        1,
        `DynamoDB throttled requests on the ${name.toLowerCase()} table`,
      );
      alarm(
        `${name}TableSystemErrors`,
        new MathExpression({
          expression: 'SUM(METRICS())',
          usingMetrics: Object.fromEntries(
            ['GetItem', 'BatchGetItem', 'PutItem', 'UpdateItem', 'Query', 'Scan', 'TransactWriteItems'].map(
              (op) => [
                op.toLowerCase(),
                new Metric({
                  namespace: 'AWS/DynamoDB',
                  metricName: 'SystemErrors',
                  dimensionsMap: { TableName: table.tableName, Operation: op },
                  statistic: 'Sum',
                  period: minute,
                }),
              ],
            ),
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
      new CfnBudget(this, 'MonthlyBudget', {
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
    if (props.reservedConcurrency !== undefined) {
      // Near the ceiling, requests start to throttle (429 from Lambda): raise it, or find who floods.
      alarm(
        'CompletionsConcurrencyNearLimit',
        completions.metric('ConcurrentExecutions', { period: minute, statistic: 'Maximum' }),
        Math.ceil(props.reservedConcurrency * 0.8),
        `Completions at 80% of its reserved concurrency (${props.reservedConcurrency})`,
      );
    }
  }

  /** One dashboard: requests, errors, latency, billed amount, holds, sweeps and the money invariants. */
  private addDashboard(completions: IFunction, models: IFunction, sweeps: Metric, negative: Metric): void {
    const service = (metricName: string, statistic = 'Sum') =>
      new Metric({
        namespace: 'HostedModelApi',
        metricName,
        dimensionsMap: { service: 'hosted-model-api' },
        statistic,
        period: Duration.minutes(5),
      });
    const url = (fn: IFunction, metricName: string) =>
      new Metric({
        namespace: 'AWS/Lambda',
        metricName,
        dimensionsMap: { FunctionName: fn.functionName },
        statistic: 'Sum',
        period: Duration.minutes(5),
      });
    new Dashboard(this, 'Dashboard', {
      widgets: [
        [
          new GraphWidget({
            title: 'Requests',
            left: [url(completions, 'UrlRequestCount'), url(models, 'UrlRequestCount')],
          }),
          new GraphWidget({
            title: 'Errors (4xx, 5xx, function errors)',
            left: [
              url(completions, 'Url4xxCount'),
              url(completions, 'Url5xxCount'),
              url(models, 'Url5xxCount'),
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
            left: [service('ExpiredHoldsReleased'), sweeps],
            right: [negative],
          }),
          new GraphWidget({
            title: 'Money alarms: billing failures, usage out of bounds',
            left: [service('BillingFailures'), service('UsageOutOfBounds')],
          }),
        ],
      ],
    });
  }
}
