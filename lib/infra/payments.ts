/**
 * The payments function: Stripe's webhook, behind the distribution at `/stripe/webhook`
 * (edge-routes.ts), crediting accounts through the same tables as the operator's top-ups. Its Stripe
 * credentials (its restricted key and the webhook's signing secret) are a secret of its own that the
 * operator puts after the first deploy (docs/deploy.md, "Connecting Stripe"): created as `{}`, so a
 * webhook before then answers 500 and Stripe keeps it for later.
 */
import { Duration, type RemovalPolicy } from 'aws-cdk-lib';
import type { TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { type FunctionUrl, FunctionUrlAuthType, InvokeMode } from 'aws-cdk-lib/aws-lambda';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { EDGE_ORIGINS } from './edge-routes.js';
import { FUNCTION_SETTINGS } from './function-settings.js';
import { ServiceFunction } from './service-function.js';
import { stripeKeySecret } from './stripe-keys.js';

/**
 * The webhook's reserved concurrency, on a stack that reserves concurrency at all (`-c
 * reservedConcurrency`: its operator has checked the account's quota; a new account's may be too
 * small for any reservation, so a stack given none reserves none here either). At most this many
 * events are handled at once, so
 * that calls to its URL (a 403 without the origin header, a 400 without Stripe's signature, but each
 * an invocation) cannot take the account's concurrency from the API's functions. Enough for Stripe:
 * an event takes one or two DynamoDB transactions and at most a Stripe read (well under a second),
 * so 10 at once is some 10-20 events a second, while Stripe sends an endpoint its events as they
 * happen, one per payment, refund or dispute. Past it, Lambda refuses the invocation (429
 * TooManyRequestsException, passed on by CloudFront) and Stripe, which takes any answer but a 2xx as a
 * failed delivery, sends the event again with exponential backoff for up to three days: delayed,
 * never lost, and credited once (by PaymentIntent) whenever it lands.
 */
export const WEBHOOK_RESERVED_CONCURRENCY = 10;

export interface PaymentsProps {
  tables: { keys: TableV2; accounts: TableV2; ledger: TableV2; holds: TableV2; audit: TableV2 };
  /** The table names, as every function gets them. */
  tableEnv: Record<string, string>;
  logRetention: RetentionDays;
  removalPolicy: RemovalPolicy;
  /** The x-origin-verify secret CloudFront sends; the webhook refuses requests without it. */
  originSecret: Secret;
  /** Reserve WEBHOOK_RESERVED_CONCURRENCY for it (the stack reserves concurrency). */
  reserveConcurrency: boolean;
}

export class Payments extends Construct {
  readonly function: ServiceFunction;
  readonly url: FunctionUrl;
  readonly secret: Secret;

  constructor(scope: Construct, id: string, props: PaymentsProps) {
    super(scope, id);
    const { tables } = props;
    // Its own restricted key and the webhook's signing secret (stripe-keys.ts): no other role reads them.
    this.secret = stripeKeySecret(scope, 'payments', props.removalPolicy);
    this.function = new ServiceFunction(scope, 'Payments', {
      entry: 'functions/payments/handler.ts',
      memorySize: FUNCTION_SETTINGS.payments.memoryMb,
      timeout: Duration.seconds(FUNCTION_SETTINGS.payments.timeoutSeconds),
      ...(props.reserveConcurrency ? { reservedConcurrentExecutions: WEBHOOK_RESERVED_CONCURRENCY } : {}),
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
      environment: {
        ...props.tableEnv,
        STRIPE_SECRET_ARN: this.secret.secretArn,
        ORIGIN_VERIFY_SECRET_ARN: props.originSecret.secretArn,
      },
    });
    const fn = this.function.fn;
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['secretsmanager:GetSecretValue'],
        resources: [this.secret.secretArn, props.originSecret.secretArn],
      }),
    );
    // What the store does for it (each item of a transaction is authorized by its own action): a
    // top-up puts its ledger entry and updates the account item, then reads it and, on a split
    // account, schedules transfers (a transfer item in the holds table, both slices updated); a refund
    // or dispute reads its reference's entry and the slices, puts its correction entry and updates
    // them; a dispute's suspension updates every slice.
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
    // A purchase's, refund's or dispute's audit entry: a Put in the transaction of its change.
    fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:PutItem'], resources: [tables.audit.tableArn] }),
    );
    this.url = fn.addFunctionUrl({
      authType: FunctionUrlAuthType[EDGE_ORIGINS.payments.urlAuthType],
      invokeMode: InvokeMode.BUFFERED,
    });
  }
}
