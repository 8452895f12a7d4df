import {
  CfnOutput,
  Duration,
  RemovalPolicy,
  SecretValue,
  Stack,
  type StackProps,
  Tags,
  Token,
} from 'aws-cdk-lib';
import { Certificate } from 'aws-cdk-lib/aws-certificatemanager';
import {
  AllowedMethods,
  CachePolicy,
  Distribution,
  type ErrorResponse,
  FunctionEventType,
  FunctionUrlOriginAccessControl,
  HttpVersion,
  type IOrigin,
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
import { Rule, RuleTargetInput, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { FunctionUrlAuthType, type IFunctionUrl, InvokeMode } from 'aws-cdk-lib/aws-lambda';
import { RetentionDays, SubscriptionFilter } from 'aws-cdk-lib/aws-logs';
import { LambdaDestination } from 'aws-cdk-lib/aws-logs-destinations';
import {
  BlockPublicAccess,
  Bucket,
  BucketEncryption,
  type IBucket,
  ObjectOwnership,
} from 'aws-cdk-lib/aws-s3';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { NO_DASHBOARD_TOP_UP_URL } from '../../functions/completions/config.js';
import { modelCatalog } from '../../functions/core/catalog.js';
import { parseTierConfig, singleUpstreamConfig } from '../../functions/core/tiers.js';
import { ORIGIN_READ_TIMEOUT_SECONDS } from '../../functions/shared/limits.js';
import { BALANCE_CHECK_INTERVAL_MINUTES, SWEEP_INTERVAL_MINUTES } from '../../functions/sweeper/schedule.js';
import { AUDIT_TABLE_ENV, TABLE_ENV } from '../tables.js';
import { Alarms } from './alarms.js';
import { TableBackups } from './backup.js';
import { BalanceWatch } from './balance-watch.js';
import { ConfigurationError } from './configuration-error.js';
import { DASHBOARD_PATHS, Dashboard } from './dashboard.js';
import { dashboardHostFunction, edgeFunction } from './edge-function.js';
import {
  DEFAULT_FUNCTION,
  EDGE_BEHAVIOURS,
  EDGE_ORIGINS,
  type EdgeFunction,
  KEY_CHECKED,
} from './edge-routes.js';
import { checkEdgeWafRegion, edgeWebAclArn } from './edge-waf.js';
import { EmailSending } from './email.js';
import { FUNCTION_SETTINGS } from './function-settings.js';
import { addGenerationMetrics, usageLinePattern } from './generation-metrics.js';
import { applyNagSuppressions } from './nag-suppressions.js';
import { Payments } from './payments.js';
import { checkDashboardOrigin, checkTopUpUrl } from './public-origin.js';
import { Reconciler } from './reconciler.js';
import { keyDailyCapsEnv, ServiceFunction } from './service-function.js';
import { ServiceTables } from './service-tables.js';
import { stripeKeySecret } from './stripe-keys.js';

export type Stage = 'sandbox' | 'prod';

/** The status codes whose responses CloudFront caches (its error caching minimum TTL applies to these). */
const CLOUDFRONT_CACHEABLE_ERRORS = [400, 403, 404, 405, 414, 416, 500, 501, 502, 503, 504] as const;

/** AWS's default concurrent-execution limit of an account: the fast path's bound in a sandbox given neither value below. */
const ACCOUNT_CONCURRENCY_DEFAULT = 1_000;

/** What a prod synth without the overdraft bound's concurrency says: both ways to give it, and how to check the quota. */
export const CONCURRENCY_REQUIRED =
  "the prod stage needs the concurrency the overdraft bound counts on: -c maxConcurrency=<n> (nothing reserved; n at least the account's concurrency limit) or -c reservedConcurrency=<n> (reserves n for completions: its ceiling, and the bound's concurrency). Check the account's quota first: aws lambda get-account-settings --query AccountLimit, where ConcurrentExecutions is the limit and a reservation must leave UnreservedConcurrentExecutions at Lambda's minimum (100) or more";

export interface ApiStackProps extends StackProps {
  stage: Stage;
  /**
   * Concurrency reserved for completions: its ceiling, and so on in-flight spend, and the overdraft
   * bound's concurrency (docs/billing.md, "Holds and the overdraft bound"). Prod needs it or maxConcurrency.
   */
  reservedConcurrency?: number;
  /** The overdraft bound's concurrency without a reservation (MAX_CONCURRENCY): at least the account's limit. */
  maxConcurrency?: number;
  /** Reserve one concurrent execution for the hold sweeper (default: none reserved). */
  reserveSweeper?: boolean;
  /** Completions function timeout in seconds (default FUNCTION_SETTINGS.completions). */
  completionsTimeoutSeconds?: number;
  /** Tier routing (TIERS_CONFIG JSON); required in prod, where there is no simulator. */
  tiersConfig?: string;
  /**
   * The 402 body's topUpUrl: https, not a placeholder host (public-origin.ts). Default: the dashboard's
   * billing page where it is deployed, else NO_DASHBOARD_TOP_UP_URL (a sandbox without one).
   */
  topUpUrl?: string;
  /**
   * The dashboard's origin on a stack without a custom domain (the sandbox only): the distribution's
   * own `https://<id>.cloudfront.net`, known after a first deploy and given as a literal on the next
   * (docs/deploy.md, "A sandbox with the dashboard"). The dashboard, its Cognito URLs, the topUpUrl
   * and its origin check are then on that origin.
   */
  dashboardOrigin?: string;
  /**
   * The dashboard's Cognito domain prefix (dashboard.ts; default the context value `authDomainPrefix`,
   * else `hosted-model-api-<stage>-<account id>`). Used only where the dashboard is deployed.
   */
  authDomainPrefix?: string;
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
  /**
   * A custom domain (with an ACM certificate in us-east-1) lets CloudFront enforce TLS 1.2, and deploys
   * the dashboard: its origin must be known before the distribution exists (dashboard.ts says why).
   * Required in prod (without it no customer could pay); both or neither.
   */
  domainName?: string;
  certificateArn?: string;
  /** A WAF web ACL in front of CloudFront (edge-waf.ts): default on in prod, off in the sandbox. */
  waf?: boolean;
  /** Use this CLOUDFRONT-scope web ACL (created in us-east-1) instead of creating one. */
  webAclArn?: string;
  /**
   * Where an environment-agnostic stack deploys: the CDK CLI's region (CDK_DEFAULT_REGION), which is
   * where `cdk deploy` puts a stack with no region of its own. Read only by the checks that depend on
   * the region (the WAF's); the template stays environment-agnostic.
   */
  deployRegion?: string;
  /** WAF's per-IP limit on requests without an `Authorization` header: requests per 5 minutes before an address is answered 429. */
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
      throw new ConfigurationError(
        'the prod stage needs the tier routing (tiersConfig): cdk deploy -c stage=prod -c tiersFile=tiers.json',
      );
    }
    // The overdraft bound (billing/holds.ts) counts on knowing how many completions can run at once: the
    // function's MAX_CONCURRENCY. Either a reservation, which is that number and enforces it, or, where
    // the account cannot spare one, maxConcurrency alone: no more can run at once than the account's
    // concurrency limit. A reservation may not bring the account's unreserved concurrency below Lambda's
    // minimum (AWS Lambda developer guide, "Configuring reserved concurrency for a function"), and a new
    // account's limit can be far below the default 1,000 ("Lambda quotas"): there, reserving fails the deploy.
    for (const name of ['reservedConcurrency', 'maxConcurrency'] as const) {
      const value = props[name];
      if (value !== undefined && !(Number.isInteger(value) && value >= 1))
        throw new ConfigurationError(`${name} must be a whole number from 1, got ${value}`);
    }
    if (props.reservedConcurrency !== undefined && props.maxConcurrency !== undefined) {
      throw new ConfigurationError(
        'give -c reservedConcurrency=<n> or -c maxConcurrency=<n>, not both: a reservation is itself the concurrency the overdraft bound counts on',
      );
    }
    if (!sandbox && props.reservedConcurrency === undefined && props.maxConcurrency === undefined) {
      throw new ConfigurationError(CONCURRENCY_REQUIRED);
    }
    if (!sandbox && !props.alarmEmail && !props.alarmTopicArn) {
      throw new ConfigurationError(
        'the prod stage needs an alarm destination: -c alarmEmail=<address> or -c alarmTopicArn=<arn>',
      );
    }
    if (Boolean(props.domainName) !== Boolean(props.certificateArn)) {
      throw new ConfigurationError(
        'a custom domain needs both -c domainName=<name> and -c certificateArn=<its ACM certificate in us-east-1>',
      );
    }
    if (!sandbox && !props.domainName) {
      throw new ConfigurationError(
        'the prod stage needs a custom domain: -c domainName=<name> -c certificateArn=<its ACM certificate in us-east-1>; without one there is no dashboard, so no customer can pay',
      );
    }
    if (props.dashboardOrigin !== undefined && (!sandbox || props.domainName)) {
      throw new ConfigurationError(
        'dashboardOrigin is for a sandbox without a custom domain: with -c domainName the dashboard is on that domain',
      );
    }
    if (props.dashboardOrigin !== undefined) checkDashboardOrigin(props.dashboardOrigin);
    if (props.topUpUrl !== undefined) checkTopUpUrl(props.topUpUrl);
    if (!sandbox && props.monthlyBudgetUsd === undefined) {
      throw new ConfigurationError(
        'the prod stage needs a cost guardrail: -c monthlyBudgetUsd=<USD> (an AWS Budgets budget notifying the alarm topic at 80%)',
      );
    }

    const waf = {
      enabled: props.waf ?? !sandbox,
      webAclArn: props.webAclArn,
      rateLimit: props.wafRateLimit,
    };
    // Before anything is built (or bundled): a web ACL that could not be created in this region.
    checkEdgeWafRegion(Token.isUnresolved(this.region) ? props.deployRegion : this.region, waf);

    // On every resource that takes tags: cost allocation and ownership by service and stage.
    Tags.of(this).add('service', 'hosted-model-api');
    Tags.of(this).add('stage', props.stage);

    const tables = new ServiceTables(this, 'Tables', {
      retain: !sandbox,
      // Named in the sandbox, so that the CI role can name them (lib/infra/ci-bootstrap-stack.ts).
      fixedNames: sandbox,
      ...(props.tableMaxReadUnits !== undefined ? { maxReadRequestUnits: props.tableMaxReadUnits } : {}),
      ...(props.tableMaxWriteUnits !== undefined ? { maxWriteRequestUnits: props.tableMaxWriteUnits } : {}),
    });
    // Daily AWS Backup recovery points of the money tables, the team's and the audit log in prod
    // (docs/deploy.md, "Restoring a table").
    if (!sandbox)
      new TableBackups(this, 'Backups', {
        tables: [tables.accounts, tables.ledger, tables.team, tables.audit],
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
    // The key that signs each generation's usage line (functions/billing/usage-record.ts): only a
    // signed line is billed from the log, so no one who can write to a log group can charge an account.
    // Read by the completions function, which writes the lines, and the logged-usage function, which
    // bills them (and by an operator running `admin bill-logged`, with their own credentials).
    const usageSigningSecret = new Secret(this, 'UsageSigning', {
      description:
        "Key of the usage lines' signature (HMAC-SHA256): only signed lines are billed from the log",
      generateSecretString: { excludePunctuation: true, passwordLength: 48 },
      removalPolicy,
    });
    const usageSigningEnv = { USAGE_SIGNING_SECRET_ARN: usageSigningSecret.secretArn };
    const readUsageSigningSecret = new PolicyStatement({
      actions: ['secretsmanager:GetSecretValue'],
      resources: [usageSigningSecret.secretArn],
    });
    const tableEnv = {
      [TABLE_ENV.keys]: tables.keys.tableName,
      [TABLE_ENV.accounts]: tables.accounts.tableName,
      [TABLE_ENV.ledger]: tables.ledger.tableName,
      [TABLE_ENV.holds]: tables.holds.tableName,
    };
    // The functions behind CloudFront check its origin header (and may read its secret).
    const originEnv = { ORIGIN_VERIFY_SECRET_ARN: originSecret.secretArn };

    // The public origin where it is a literal (a custom domain, or a sandbox's dashboardOrigin): only
    // then is the dashboard deployed (dashboard.ts: CloudFront's default domain read from the
    // distribution would be a dependency cycle), and its billing page is the 402's topUpUrl unless one
    // is given. Without it (a sandbox's first deploy) the 402 names a page that never resolves.
    const publicOrigin = props.domainName
      ? `https://${props.domainName}`
      : props.dashboardOrigin !== undefined
        ? checkDashboardOrigin(props.dashboardOrigin)
        : undefined;
    const topUpUrl =
      props.topUpUrl ??
      (publicOrigin ? `${publicOrigin}${DASHBOARD_PATHS.billing}` : NO_DASHBOARD_TOP_UP_URL);

    // Per-key daily caps (-c keyDailyCaps=true; off by default): the cap's 402 names the dashboard's
    // Settings → API page, where a key's cap is set, where the dashboard is deployed.
    const capsEnv = keyDailyCapsEnv(this);
    const keyCapsEnv =
      capsEnv.KEY_DAILY_CAPS && publicOrigin
        ? { ...capsEnv, KEY_CAPS_URL: `${publicOrigin}${DASHBOARD_PATHS.keys}` }
        : capsEnv;

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
        ...originEnv,
        ...usageSigningEnv,
        ...upstreamEnv,
        UPSTREAM_SECRET_ARN: upstreamSecret.secretArn,
        KEEPALIVE_INTERVAL_MS: '10000',
        // The fast path's bound (billing/holds.ts): how many completions can run at once. The reserved
        // concurrency, or maxConcurrency (prod needs one); the account's default in a sandbox given neither.
        MAX_CONCURRENCY: String(
          props.reservedConcurrency ?? props.maxConcurrency ?? ACCOUNT_CONCURRENCY_DEFAULT,
        ),
        TOP_UP_URL: topUpUrl,
        ...keyCapsEnv,
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
        ...originEnv,
        // GET /api/v1/key states a key's cap only with caps on.
        ...capsEnv,
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
    completions.fn.addToRolePolicy(readUsageSigningSecret);
    // IAM authorizes each item of a transaction by its own action, never the transaction's ("Using IAM
    // with DynamoDB transactions"): the settlement puts its ledger entry, updates the slice and deletes
    // a hold; a deferral checks the ledger (ConditionCheckItem) and updates the hold, or puts one; a
    // held request's usage record is an UpdateItem on its hold. The local IAM layer holds every call of
    // the suites to this policy (lib/local/iam.ts).
    completions.fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:PutItem', 'dynamodb:ConditionCheckItem'],
        resources: [tables.ledger.tableArn],
      }),
    );
    completions.fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:UpdateItem'], resources: [tables.accounts.tableArn] }),
    );
    completions.fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'],
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
    // GET /api/v1/generation reads one ledger entry of the caller's own account; GET /api/v1/credits
    // sums its top-ups and corrections (Queries of its own partition). GET /api/v1/key reads the caller's key item and
    // the account's slice items (GetItem, BatchGetItem: readAuth above).
    models.fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:Query'],
        resources: [tables.ledger.tableArn],
      }),
    );

    // The hold sweeper: releases holds whose request died before settling, on a schedule.
    // Its scheduled (asynchronous) invocations that still fail after Lambda's retries land here, with
    // an alarm. It reserves one concurrent execution only with reserveSweeper (one sweep at a time, and
    // one always free for it): a reservation fails the deploy where the account's unreserved concurrency
    // would drop below Lambda's minimum. Without it a sweep waits for the account's unreserved
    // concurrency like any function (a sweep throttled too long shows as SweeperStopped), and two slow
    // sweeps may overlap, which is safe: each write of a sweep is a transaction conditioned on the hold
    // item still being there or the generation's ledger entry not yet being there, so a hold is released
    // or billed once (functions/sweeper/sweep.ts).
    const sweeperFailures = new Queue(this, 'HoldSweeperFailures', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
      removalPolicy,
    });
    const sweeper = new ServiceFunction(this, 'HoldSweeper', {
      entry: 'functions/sweeper/handler.ts',
      memorySize: FUNCTION_SETTINGS.sweeper.memoryMb,
      timeout: Duration.seconds(FUNCTION_SETTINGS.sweeper.timeoutSeconds),
      ...(props.reserveSweeper ? { reservedConcurrentExecutions: 1 } : {}),
      deadLetterQueue: sweeperFailures,
      logRetention,
      removalPolicy,
      environment: tableEnv,
    });
    // A throttled scheduled invocation waits in Lambda's own asynchronous queue, up to 6 hours by
    // default ("How Lambda handles errors and retries with asynchronous invocation"): a sweep that old
    // is worth nothing (the next one is a minute away), so events older than two minutes are dropped
    // into the dead-letter queue above (alarmed) instead of piling up behind a throttle.
    sweeper.fn.configureAsyncInvoke({ maxEventAge: Duration.minutes(2) });
    sweeper.fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:Scan', 'dynamodb:DeleteItem'],
        resources: [tables.holds.tableArn],
      }),
    );
    sweeper.fn.addToRolePolicy(
      new PolicyStatement({
        // UpdateItem releases a hold's amount and moves a due transfer between two slices (GetItem
        // reads its source first); Scan counts the accounts below zero (the balance check).
        actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:Scan'],
        resources: [tables.accounts.tableArn],
      }),
    );
    // A deferred settlement it completes is the settlement's transaction: its ledger entry is a Put
    // (a transaction needs the permission of each action in it).
    sweeper.fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:PutItem'], resources: [tables.ledger.tableArn] }),
    );
    // EventBridge's delivery of each scheduled event: no retry, and no event older than two minutes (the
    // hold sweep, every minute) or than one interval (the balance check), instead of its default of 24
    // hours (Amazon EventBridge user guide, "How EventBridge retries delivering events"). Once delivered,
    // the event is in Lambda's asynchronous queue, whose maximum age (6 hours by default) is the
    // function's setting, not the rule's.
    new Rule(this, 'HoldSweep', {
      description: 'Release expired holds',
      schedule: Schedule.rate(Duration.minutes(SWEEP_INTERVAL_MINUTES)),
      targets: [
        new LambdaFunction(sweeper.fn, {
          retryAttempts: 0,
          maxEventAge: Duration.minutes(Math.max(2, SWEEP_INTERVAL_MINUTES)),
        }),
      ],
    });
    new Rule(this, 'BalanceCheck', {
      description: 'Count the accounts below zero (a money invariant)',
      schedule: Schedule.rate(Duration.minutes(BALANCE_CHECK_INTERVAL_MINUTES)),
      targets: [
        new LambdaFunction(sweeper.fn, {
          retryAttempts: 0,
          maxEventAge: Duration.minutes(BALANCE_CHECK_INTERVAL_MINUTES),
          event: RuleTargetInput.fromObject({ check: 'balances' }),
        }),
      ],
    });

    // The logged-usage function: CloudWatch Logs delivers it each `generation usage` line of the
    // completions log (a subscription filter), and it bills those with no ledger entry, so a function
    // killed between its reply and its settlement write is billed without an operator
    // (functions/logged-usage/). Lambda is a destination CloudWatch Logs invokes asynchronously with
    // the base64 of gzipped JSON; the permission for logs.amazonaws.com is LambdaDestination's.
    // https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/SubscriptionFilters.html#LambdaFunctionExample
    // https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_logs_destinations.LambdaDestination.html
    // Lambda retries a failed invocation twice (throttled ones for up to 6 hours), then sends the event
    // to the queue below, alarmed; the lines stay in the log for `admin bill-logged` either way
    // (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async.html).
    const loggedUsageFailures = new Queue(this, 'LoggedUsageFailures', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
      removalPolicy,
    });
    const loggedUsage = new ServiceFunction(this, 'LoggedUsage', {
      entry: 'functions/logged-usage/handler.ts',
      memorySize: FUNCTION_SETTINGS.loggedUsage.memoryMb,
      timeout: Duration.seconds(FUNCTION_SETTINGS.loggedUsage.timeoutSeconds),
      deadLetterQueue: loggedUsageFailures,
      logRetention,
      removalPolicy,
      environment: {
        ...tableEnv,
        ...usageSigningEnv,
        // The tiers the completions function prices by: what a usage line may bill at most. The
        // sandbox's simulator is priced as singleUpstreamConfig prices it, whatever its URL.
        TIERS_CONFIG:
          props.tiersConfig ?? JSON.stringify(singleUpstreamConfig('https://simulator.invalid/v1')),
      },
    });
    loggedUsage.fn.addToRolePolicy(readUsageSigningSecret);
    // The settlement's transaction (a ledger Put, the slice's Update, the hold's Delete), and the
    // eventually consistent read of the ledger entries before it.
    loggedUsage.fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:BatchGetItem', 'dynamodb:PutItem'],
        resources: [tables.ledger.tableArn],
      }),
    );
    loggedUsage.fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:UpdateItem'], resources: [tables.accounts.tableArn] }),
    );
    loggedUsage.fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:DeleteItem'], resources: [tables.holds.tableArn] }),
    );
    new SubscriptionFilter(this, 'UsageLinesToLoggedUsage', {
      logGroup: completions.logGroup,
      filterPattern: usageLinePattern(),
      destination: new LambdaDestination(loggedUsage.fn),
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

    // Stripe's webhook (payments.ts), behind the distribution with the API.
    // The functions that write the audit log are told of its table (its entries are theirs to Put).
    const auditEnv = { [AUDIT_TABLE_ENV]: tables.audit.tableName };
    const payments = new Payments(this, 'Stripe', {
      tables,
      tableEnv: { ...tableEnv, ...auditEnv },
      logRetention,
      removalPolicy,
      originSecret,
      reserveConcurrency: props.reservedConcurrency !== undefined,
    });

    // The stack's e-mail through SES (email.ts): the balance watch's and the user pool's, beside the dashboard.
    const email = publicOrigin
      ? new EmailSending(this, 'Email', { domainName: new URL(publicOrigin).hostname })
      : undefined;
    // The customers' dashboard (dashboard.ts), behind the distribution at /dashboard: where its origin is
    // a literal (a custom domain, or a sandbox's -c dashboardOrigin).
    // The dashboard's own restricted key (Checkout Sessions), in its own secret (stripe-keys.ts).
    const dashboardStripeSecret =
      publicOrigin && email ? stripeKeySecret(this, 'dashboard', removalPolicy) : undefined;
    const dashboard =
      publicOrigin && email && dashboardStripeSecret
        ? new Dashboard(this, 'CustomerDashboard', {
            email,
            stage: props.stage,
            origin: publicOrigin,
            ...(props.authDomainPrefix ? { authDomainPrefix: props.authDomainPrefix } : {}),
            tables,
            tableEnv,
            stripeSecret: dashboardStripeSecret,
            originSecret,
            fixedTableName: sandbox,
            ...(props.tableMaxReadUnits !== undefined
              ? { maxReadRequestUnits: props.tableMaxReadUnits }
              : {}),
            ...(props.tableMaxWriteUnits !== undefined
              ? { maxWriteRequestUnits: props.tableMaxWriteUnits }
              : {}),
            logRetention,
            removalPolicy,
          })
        : undefined;

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

    // Pinned to a version during a rotation (docs/deploy.md, "Rotating the origin secret"): a changed reference
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
    const { functionAssociations: _keyCheck, ...keyless } = behaviour;
    // The dashboard's behaviours on a custom domain: the distribution's own name redirects to it there.
    const dashboardHost = props.domainName ? dashboardHostFunction(this, props.domainName) : undefined;
    const siteBehaviour = (fn: EdgeFunction, origin: IOrigin) =>
      fn === 'dashboard' && dashboardHost
        ? {
            ...keyless,
            origin,
            functionAssociations: [{ function: dashboardHost, eventType: FunctionEventType.VIEWER_REQUEST }],
          }
        : { ...keyless, origin };
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
    const origins: Partial<Record<EdgeFunction, IOrigin>> = {
      completions: originOf('completions', completionsUrl, {
        // Before the first byte (a stream's first keep-alive is immediate).
        readTimeout: Duration.seconds(ORIGIN_READ_TIMEOUT_SECONDS),
        keepaliveTimeout: Duration.seconds(60),
      }),
      models: originOf('models', modelsUrl),
      payments: originOf('payments', payments.url),
      ...(dashboard ? { dashboard: originOf('dashboard', dashboard.url) } : {}),
    };
    // A behaviour for each function deployed (the dashboard's only where it is).
    const originFor = (fn: EdgeFunction): IOrigin => {
      const origin = origins[fn];
      if (!origin) throw new Error(`no origin for ${fn}`);
      return origin;
    };
    const webAclId = edgeWebAclArn(this, waf);
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
      defaultBehavior: { ...behaviour, origin: originFor(DEFAULT_FUNCTION) },
      additionalBehaviors: Object.fromEntries(
        EDGE_BEHAVIOURS.filter(({ fn }) => origins[fn] !== undefined).map(({ pathPattern, fn }) => [
          pathPattern,
          // The API key check is the API's: a site behaviour has none (the dashboard's, its host redirect).
          KEY_CHECKED[fn] ? { ...behaviour, origin: originFor(fn) } : siteBehaviour(fn, originFor(fn)),
        ]),
      ),
    });

    const monitoring = new Alarms(this, 'Monitoring', {
      ...props,
      completions: completions.fn,
      models: models.fn,
      sweeper: sweeper.fn,
      payments: payments.function.fn,
      ...(dashboard ? { dashboard: dashboard.function.fn, dashboardTable: dashboard.table } : {}),
      sweeperFailures,
      loggedUsageFailures,
      loggedUsage: loggedUsage.fn,
      usageLines: completions.logGroup,
      // The prod backups (TableBackups, above): a failed job of their vault notifies the alarm topic.
      ...(this.node.tryFindChild('Backups') instanceof TableBackups
        ? { backupVault: (this.node.tryFindChild('Backups') as TableBackups).vault }
        : {}),
      tables,
    });

    // The payments reconciler (reconciler.ts): the Stripe events the webhook missed, applied on a schedule.
    const reconcilerStripeSecret = stripeKeySecret(this, 'reconciler', removalPolicy);
    new Reconciler(this, 'Reconcile', {
      tables,
      tableEnv: { ...tableEnv, ...auditEnv },
      stripeSecret: reconcilerStripeSecret,
      ...(dashboard ? { dashboard: { table: dashboard.table, billingUrl: dashboard.billingUrl } } : {}),
      alarmTopic: monitoring.topic,
      logRetention,
      removalPolicy,
    });

    // The balance watch (balance-watch.ts): low-balance e-mails and auto top-ups, beside the dashboard,
    // with its own restricted key (off-session PaymentIntents) in its own secret (stripe-keys.ts).
    let watchStripeSecret: Secret | undefined;
    if (dashboard && email) {
      email.alarmTo(monitoring.topic);
      watchStripeSecret = stripeKeySecret(this, 'watch', removalPolicy);
      new BalanceWatch(this, 'Watch', {
        email,
        tables,
        dashboardTable: dashboard.table,
        tableEnv: { ...tableEnv, ...auditEnv },
        stripeSecret: watchStripeSecret,
        billingUrl: dashboard.billingUrl,
        payments: payments.function.fn,
        dashboard: dashboard.function.fn,
        alarmTopic: monitoring.topic,
        logRetention,
        removalPolicy,
      });
    }

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
    new CfnOutput(this, 'AuditTableName', {
      value: tables.audit.tableName,
      description: "The audit log (AUDIT_TABLE): the operator CLI writes its changes' entries there",
    });
    new CfnOutput(this, 'UpstreamSecretArn', { value: upstreamSecret.secretArn });
    new CfnOutput(this, 'UsageSigningSecretArn', {
      value: usageSigningSecret.secretArn,
      description: "The usage lines' signing key: admin bill-logged reads it (USAGE_SIGNING_SECRET_ARN)",
    });
    new CfnOutput(this, 'StripeWebhookUrl', {
      value: baseUrl.replace(/\/api\/v1$/, '/stripe/webhook'),
      description: 'The endpoint URL to give Stripe\'s webhook (docs/deploy.md, "Connecting Stripe")',
    });
    new CfnOutput(this, 'StripeSecretArn', {
      value: payments.secret.secretArn,
      description:
        'Where the payments function\'s restricted Stripe key and the webhook signing secret go (docs/deploy.md, "Connecting Stripe")',
    });
    new CfnOutput(this, 'StripeReconcilerSecretArn', {
      value: reconcilerStripeSecret.secretArn,
      description: 'Where the reconciler\'s restricted Stripe key goes (docs/deploy.md, "Connecting Stripe")',
    });
    if (dashboardStripeSecret)
      new CfnOutput(this, 'StripeDashboardSecretArn', {
        value: dashboardStripeSecret.secretArn,
        description:
          'Where the dashboard\'s restricted Stripe key goes (docs/deploy.md, "Connecting Stripe")',
      });
    if (watchStripeSecret)
      new CfnOutput(this, 'StripeWatchSecretArn', {
        value: watchStripeSecret.secretArn,
        description:
          'Where the balance watch\'s restricted Stripe key goes (docs/deploy.md, "Connecting Stripe")',
      });
    if (dashboard) {
      new CfnOutput(this, 'DashboardUrl', {
        value: `${publicOrigin}${DASHBOARD_PATHS.home}`,
        description:
          "The customers' dashboard (sign in, keys, credits); its billing page is the 402's topUpUrl",
      });
      new CfnOutput(this, 'DashboardUserPoolId', {
        value: dashboard.userPool.userPoolId,
        description: 'The dashboard\'s Cognito user pool (docs/deploy.md, "Connecting Cognito")',
      });
      new CfnOutput(this, 'DashboardTableName', {
        value: dashboard.table.tableName,
        description:
          "The dashboard's table: its users' e-mail addresses, which the operator CLI shows and finds accounts by (DASHBOARD_TABLE)",
      });
      new CfnOutput(this, 'DashboardSignInDomain', {
        value: dashboard.domain.baseUrl(),
        description: "Cognito's managed login for the dashboard (its prefix: -c authDomainPrefix=...)",
      });
    }
    new CfnOutput(this, 'OriginSecretArn', {
      value: originSecret.secretArn,
      description:
        'The x-origin-verify secret that CloudFront sends and the functions check (rotate it here)',
    });

    applyNagSuppressions(this);
  }
}
