/**
 * The customers' dashboard (functions/dashboard/): its sessions table, the Cognito user pool its users
 * sign in with (managed login on a Cognito prefix domain, a confidential app client), the client's
 * secret in Secrets Manager, the function with exactly the grants its code needs, and its Function
 * URL, which the distribution reaches at `/dashboard` and `/dashboard/*` (edge-routes.ts).
 *
 * Deployed only where its origin is a literal (a custom domain, `-c domainName=... -c certificateArn=...`), and why:
 * the dashboard must know its public origin twice, in its function (DASHBOARD_ORIGIN: the CSRF check,
 * Checkout's return URLs, the OpenID redirect URI) and in the app client (its callback and logout
 * URLs). With CloudFront's default domain that origin is the distribution's own domain name, known
 * only once the distribution exists; and the distribution needs the function's URL as its origin. The
 * function (and the client its environment names) would depend on the distribution, which depends on
 * the function's URL: a circular dependency CloudFormation refuses. A custom domain is a literal, so
 * every one of those values is known before anything is created. The ways around it for the default
 * domain (the origin read per request from a header a viewer-request function sets, the callback URL
 * put on the client afterwards by a custom resource) each add a moving part to sign-in, the one path
 * that must not break; a customer-facing sign-in page on `*.cloudfront.net` is not what a product
 * ships either. A sandbox may still have one on its distribution's own name, given as a literal on a
 * second deploy (`-c dashboardOrigin=`); without either the stack has no dashboard and no behaviour
 * for it (docs/deploy.md "Connecting Cognito", "A sandbox with the dashboard").
 */
import { Aws, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import {
  AccountRecovery,
  CfnManagedLoginBranding,
  FeaturePlan,
  ManagedLoginVersion,
  Mfa,
  OAuthScope,
  UserPool,
  type UserPoolClient,
  UserPoolClientIdentityProvider,
  type UserPoolDomain,
  UserPoolEmail,
  UserPoolOperation,
  VerificationEmailStyle,
} from 'aws-cdk-lib/aws-cognito';
import type { TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { type FunctionUrl, FunctionUrlAuthType, InvokeMode } from 'aws-cdk-lib/aws-lambda';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { SIGN_UP_LIMIT_DEFAULTS, SIGN_UP_LIMIT_ENV } from '../../functions/sign-up-guard/guard.js';
import {
  AUDIT_TABLE_ENV,
  DASHBOARD_TABLE,
  DASHBOARD_TABLE_ENV,
  TABLES,
  TEAM_TABLE,
  TEAM_TABLE_ENV,
} from '../tables.js';
import { EDGE_ORIGINS } from './edge-routes.js';
import type { EmailSending } from './email.js';
import { FUNCTION_SETTINGS } from './function-settings.js';
import { keyDailyCapsEnv, ServiceFunction } from './service-function.js';
import { serviceTable } from './service-tables.js';

/** The dashboard's paths under its origin: the OpenID callback, where sign-out lands, billing (the 402's topUpUrl), keys. */
export const DASHBOARD_PATHS = {
  home: '/dashboard/',
  callback: '/dashboard/callback',
  billing: '/dashboard/billing',
  /** Settings → API: the keys, and their daily caps where caps are on (the cap's 402 names it). */
  keys: '/dashboard/settings/api',
} as const;

/**
 * A Cognito prefix domain: lowercase letters, digits and hyphens, 1 to 63 characters, not starting or
 * ending with a hyphen, and without the words Cognito reserves (aws, amazon, cognito).
 */
export function checkAuthDomainPrefix(prefix: string): string {
  if (!/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(prefix) || /aws|amazon|cognito/.test(prefix))
    throw new Error(
      `authDomainPrefix must be 1 to 63 lowercase letters, digits and hyphens (not at either end), without "aws", "amazon" or "cognito"; got ${prefix}`,
    );
  return prefix;
}

/** The sign-up caps: the context values signUpsPerHour, signUpsPerDay, signUpsPerDomainPerDay, else the defaults. */
function signUpCapsOf(node: Construct['node']): typeof SIGN_UP_LIMIT_DEFAULTS {
  const caps = { ...SIGN_UP_LIMIT_DEFAULTS };
  const keys = {
    perHour: 'signUpsPerHour',
    perDay: 'signUpsPerDay',
    perDomainPerDay: 'signUpsPerDomainPerDay',
  };
  for (const [key, name] of Object.entries(keys) as [keyof typeof caps, string][]) {
    const given = node.tryGetContext(name) as string | number | undefined;
    if (given === undefined || given === '') continue;
    const n = Number(given);
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got ${given}`);
    caps[key] = n;
  }
  return caps;
}

export interface DashboardProps {
  stage: 'sandbox' | 'prod';
  /** The public origin, `https://<custom domain>` or a sandbox's dashboardOrigin: a literal (the module comment says why). */
  origin: string;
  /**
   * The Cognito domain prefix (`https://<prefix>.auth.<region>.amazoncognito.com`), unique in its
   * region. Default: the context value `authDomainPrefix`, else `hosted-model-api-<stage>-<account id>`.
   */
  authDomainPrefix?: string;
  tables: {
    keys: TableV2;
    accounts: TableV2;
    ledger: TableV2;
    holds: TableV2;
    team: TableV2;
    audit: TableV2;
  };
  /** The stack's e-mail (email.ts): the pool's codes go out through SES from its sender. */
  email: EmailSending;
  /** The table names, as every function gets them. */
  tableEnv: Record<string, string>;
  /** Stripe's credentials (payments.ts): Checkout sessions are made with its API key. */
  stripeSecret: Secret;
  /** The x-origin-verify secret CloudFront sends; the dashboard refuses requests without it. */
  originSecret: Secret;
  /** Name the table after the stack (the sandbox, as its other tables). */
  fixedTableName: boolean;
  maxReadRequestUnits?: number;
  maxWriteRequestUnits?: number;
  logRetention: RetentionDays;
  removalPolicy: RemovalPolicy;
}

export class Dashboard extends Construct {
  readonly table: TableV2;
  readonly userPool: UserPool;
  readonly domain: UserPoolDomain;
  readonly client: UserPoolClient;
  readonly clientSecret: Secret;
  readonly function: ServiceFunction;
  readonly url: FunctionUrl;
  /** The billing page: the 402's topUpUrl by default. */
  readonly billingUrl: string;
  /** The pre-sign-up trigger that limits self sign-ups. */
  readonly signUpGuard: ServiceFunction;

  constructor(scope: Construct, id: string, props: DashboardProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const retain = props.removalPolicy === RemovalPolicy.RETAIN;
    const { tables } = props;

    // Sessions and the OpenID subject -> account links (functions/adapters/dynamodb/dashboard.ts), as the
    // service's other tables are made (service-tables.ts), with DynamoDB's TTL deleting expired sessions.
    this.table = serviceTable(scope, 'DashboardTable', DASHBOARD_TABLE, {
      retain,
      fixedNames: props.fixedTableName,
      ...(props.maxReadRequestUnits !== undefined ? { maxReadRequestUnits: props.maxReadRequestUnits } : {}),
      ...(props.maxWriteRequestUnits !== undefined
        ? { maxWriteRequestUnits: props.maxWriteRequestUnits }
        : {}),
    });

    // The customers: they sign up themselves with their email, verified by a code before they can sign
    // in; the password policy below (12 characters with all four classes) is stated on the sign-up page.
    // TOTP MFA is theirs to turn on (nag-suppressions.ts: COG2); creating a key or changing auto top-up
    // asks for a sign-in of the last minutes (docs/dashboard.md). Essentials: managed login.
    // Its e-mail (the verification codes) goes through SES from the stack's identity, with its
    // configuration set (email.ts): Cognito's own e-mail (COGNITO_DEFAULT) sends 50 a day, which one
    // sign-up bot exhausts.
    const { email } = props;
    this.userPool = new UserPool(scope, 'DashboardUsers', {
      email: UserPoolEmail.withSES({
        fromEmail: email.sender,
        ...(email.identityName.includes('@') ? {} : { sesVerifiedDomain: email.identityName }),
        configurationSetName: email.configurationSetName,
        // The stack's own region (a token in an environment-agnostic stack, which CDK cannot infer).
        sesRegion: stack.region,
      }),
      signInAliases: { email: true },
      signInCaseSensitive: false,
      selfSignUpEnabled: true,
      autoVerify: { email: true },
      keepOriginal: { email: true },
      userVerification: {
        emailStyle: VerificationEmailStyle.CODE,
        emailSubject: 'Your verification code',
        emailBody: 'Your verification code is {####}',
      },
      standardAttributes: { email: { required: true, mutable: true } },
      passwordPolicy: {
        minLength: 12,
        requireLowercase: true,
        requireUppercase: true,
        requireDigits: true,
        requireSymbols: true,
        tempPasswordValidity: Duration.days(3),
      },
      mfa: Mfa.OPTIONAL,
      mfaSecondFactor: { otp: true, sms: false },
      accountRecovery: AccountRecovery.EMAIL_ONLY,
      featurePlan: FeaturePlan.ESSENTIALS,
      deletionProtection: retain,
      removalPolicy: props.removalPolicy,
    });
    this.userPool.node.addDependency(email.identity, email.configurationSet);
    email.allowCognito(this.userPool);

    // Sign-up limits (functions/sign-up-guard/): a pre-sign-up trigger counts each self sign-up against
    // caps per hour, per day and per e-mail domain per day (context signUpsPerHour, signUpsPerDay,
    // signUpsPerDomainPerDay), in this table, before Cognito sends a code. Cognito waits 5 s for it.
    const caps = signUpCapsOf(this.node);
    const guard = new ServiceFunction(scope, 'SignUpGuard', {
      entry: 'functions/sign-up-guard/handler.ts',
      memorySize: 256,
      timeout: Duration.seconds(5),
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
      environment: {
        ...props.tableEnv,
        [DASHBOARD_TABLE_ENV]: this.table.tableName,
        [SIGN_UP_LIMIT_ENV.perHour]: String(caps.perHour),
        [SIGN_UP_LIMIT_ENV.perDay]: String(caps.perDay),
        [SIGN_UP_LIMIT_ENV.perDomainPerDay]: String(caps.perDomainPerDay),
      },
    });
    // Exactly what it does: one transaction of three counters' updates (each item an UpdateItem).
    guard.fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:UpdateItem'], resources: [this.table.tableArn] }),
    );
    this.userPool.addTrigger(UserPoolOperation.PRE_SIGN_UP, guard.fn);
    this.signUpGuard = guard;
    // One given (a prop, or `-c authDomainPrefix=...`) is used as it is; the default has the stage and
    // the account id (a token, resolved by CloudFormation), so that neither two stages nor two accounts
    // ask for the same prefix in a region.
    const given =
      props.authDomainPrefix ?? (this.node.tryGetContext('authDomainPrefix') as string | undefined);
    const domainPrefix = given
      ? checkAuthDomainPrefix(given)
      : `hosted-model-api-${props.stage}-${Aws.ACCOUNT_ID}`;
    this.domain = this.userPool.addDomain('DashboardLogin', {
      cognitoDomain: { domainPrefix },
      managedLoginVersion: ManagedLoginVersion.NEWER_MANAGED_LOGIN,
    });

    // The dashboard's client: confidential (a secret, client_secret_basic), the authorization code grant
    // only (with PKCE, which the dashboard always sends), the scopes it asks for, its two URLs.
    this.client = this.userPool.addClient('DashboardClient', {
      generateSecret: true,
      oAuth: {
        flows: { authorizationCodeGrant: true, implicitCodeGrant: false, clientCredentials: false },
        scopes: [OAuthScope.OPENID, OAuthScope.EMAIL],
        callbackUrls: [`${props.origin}${DASHBOARD_PATHS.callback}`],
        logoutUrls: [`${props.origin}${DASHBOARD_PATHS.home}`],
      },
      supportedIdentityProviders: [UserPoolClientIdentityProvider.COGNITO],
      preventUserExistenceErrors: true,
      idTokenValidity: Duration.hours(1),
      accessTokenValidity: Duration.hours(1),
      refreshTokenValidity: Duration.days(1),
    });
    // Managed login's pages need a style for the client: Cognito's own.
    new CfnManagedLoginBranding(scope, 'DashboardLoginBranding', {
      userPoolId: this.userPool.userPoolId,
      clientId: this.client.userPoolClientId,
      useCognitoProvidedValues: true,
    });
    // The client's secret, read by the function at its first sign-in (OIDC_CLIENT_SECRET_ARN): never in
    // its environment. Written from the client itself at deploy time (a DescribeUserPoolClient custom
    // resource); rotating it means a new client (docs/deploy.md, "Connecting Cognito").
    this.clientSecret = new Secret(scope, 'DashboardOidcClientSecret', {
      description: "The dashboard's Cognito app client secret (its OpenID client_secret)",
      secretStringValue: this.client.userPoolClientSecret,
      removalPolicy: props.removalPolicy,
    });

    // Not 'Dashboard': the stack's CloudWatch dashboard has that id (alarms.ts).
    this.function = new ServiceFunction(scope, 'DashboardFunction', {
      entry: 'functions/dashboard/handler.ts',
      memorySize: FUNCTION_SETTINGS.dashboard.memoryMb,
      timeout: Duration.seconds(FUNCTION_SETTINGS.dashboard.timeoutSeconds),
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
      environment: {
        ...props.tableEnv,
        [DASHBOARD_TABLE_ENV]: this.table.tableName,
        DASHBOARD_ORIGIN: props.origin,
        OIDC_ISSUER: `https://cognito-idp.${stack.region}.${Aws.URL_SUFFIX}/${this.userPool.userPoolId}`,
        OIDC_CLIENT_ID: this.client.userPoolClientId,
        // Where sign-out sends the browser (Cognito's /logout on the managed login domain): the
        // pages' CSP must let the sign-out form's redirect go there.
        OIDC_SIGN_OUT_ORIGIN: this.domain.baseUrl(),
        OIDC_CLIENT_SECRET_ARN: this.clientSecret.secretArn,
        [TEAM_TABLE_ENV]: tables.team.tableName,
        [AUDIT_TABLE_ENV]: tables.audit.tableName,
        STRIPE_SECRET_ARN: props.stripeSecret.secretArn,
        ORIGIN_VERIFY_SECRET_ARN: props.originSecret.secretArn,
        // Settings → API shows and sets a key's cap only with -c keyDailyCaps=true.
        ...keyDailyCapsEnv(this),
      },
    });
    const fn = this.function.fn;
    // Exactly what its code does (each item of a transaction is authorized by its own action; the local
    // IAM layer holds every call of test/integration/dashboard-flow.test.ts to this policy):
    // - sessions, user links and each account's remembered Stripe Customer: read, put (conditional),
    //   and a session deleted at sign-out or sign-in;
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:DeleteItem'],
        resources: [this.table.tableArn],
      }),
    );
    // - keys: listed by account and found by key id (the two indexes), created (a transaction's Put,
    //   with the Update of the account's count of active keys), read and revoked (GetItem, UpdateItem:
    //   an active key's in a transaction with that count's Update);
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:Query'],
        resources: TABLES.keys.indexes.map((index) => `${tables.keys.tableArn}/index/${index.name}`),
      }),
    );
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
        resources: [tables.keys.tableArn],
      }),
    );
    // - accounts: made at a first sign-in ($0: the account item's Put alone, no ledger entry), its count
    //   of active keys updated by a key's creation and revocation (made from its keys when it has
    //   none), and read as one snapshot of its slices (GetItem, TransactGetItems' Gets);
    //   Activity reads a split account's slices (each key's spend, the day counters) in one BatchGetItem;
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:BatchGetItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
        resources: [tables.accounts.tableArn],
      }),
    );
    // - the ledger: the billing history, two Queries of the account's partition by entry id prefix.
    fn.addToRolePolicy(
      new PolicyStatement({ actions: ['dynamodb:Query'], resources: [tables.ledger.tableArn] }),
    );
    // - the team (functions/adapters/dynamodb/team.ts, invitations.ts): a member read (every request),
    //   members and invitations listed (Query), the memberships of a person (the byMember index);
    //   changes as transactions of Puts, Updates (a role, the owners count) and Deletes;
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: [
          'dynamodb:GetItem',
          'dynamodb:Query',
          'dynamodb:PutItem',
          'dynamodb:UpdateItem',
          'dynamodb:DeleteItem',
        ],
        resources: [tables.team.tableArn],
      }),
    );
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:Query'],
        resources: TEAM_TABLE.indexes.map((index) => `${tables.team.tableArn}/index/${index.name}`),
      }),
    );
    // - the audit log: an entry Put with each change (never updated or deleted), the log's pages (Query).
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:PutItem', 'dynamodb:Query'],
        resources: [tables.audit.tableArn],
      }),
    );
    // Its secrets: the OpenID client's, Stripe's (Checkout), and the origin header's (current and previous).
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['secretsmanager:GetSecretValue'],
        resources: [this.clientSecret.secretArn, props.stripeSecret.secretArn, props.originSecret.secretArn],
      }),
    );
    this.url = fn.addFunctionUrl({
      authType: FunctionUrlAuthType[EDGE_ORIGINS.dashboard.urlAuthType],
      invokeMode: InvokeMode.BUFFERED,
    });
    this.billingUrl = `${props.origin}${DASHBOARD_PATHS.billing}`;
  }
}
