import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoStore, type TableNames } from '../../functions/adapters/dynamodb/index.js';
import {
  WATCH_OUTBOX_INTERVAL_MINUTES,
  WATCH_SWEEP_INTERVAL_MINUTES,
} from '../../functions/balance-watch/schedule.js';
import { modelCatalog } from '../../functions/core/catalog.js';
import { parseTierConfig, singleUpstreamConfig } from '../../functions/core/tiers.js';
import { RECONCILE_INTERVAL_MINUTES } from '../../functions/reconciler/schedule.js';
import { keyDailyCapsOn } from '../../functions/shared/env.js';
import { startSimulator } from '../../functions/simulator/server.js';
import { SWEEP_INTERVAL_MINUTES } from '../../functions/sweeper/schedule.js';
import { edgeFunctionCode } from '../infra/edge-function.js';
import {
  EDGE_ORIGINS,
  type EdgeFunction,
  edgeFunctionFor,
  KEY_CHECKED,
  type OriginSetup,
} from '../infra/edge-routes.js';
import { FUNCTION_SETTINGS } from '../infra/function-settings.js';
import {
  AUDIT_TABLE_ENV,
  DASHBOARD_TABLE_ENV,
  LOCAL_AUDIT_TABLE_NAME,
  LOCAL_DASHBOARD_TABLE_NAME,
  LOCAL_TABLE_NAMES,
  LOCAL_TEAM_TABLE_NAME,
  TABLE_ENV,
  TABLES,
  TEAM_TABLE_ENV,
} from '../tables.js';
import { type DynamoLimits, startDynamoLimits } from './dynamodb-limits.js';
import {
  dynamoAnswers,
  ensureDashboardTable,
  ensureTables,
  ensureTeamTables,
  localClient,
  type RunningDynamo,
  startDynamoLocal,
  streamArnOf,
} from './dynamodb-local.js';
import {
  type EmulatedFunction,
  type EmulatorOptions,
  type RunningEmulator,
  startEmulator,
} from './emulator.js';
import {
  credentialEnv,
  credentialsOf,
  type Denial,
  deniedCall,
  type IamLayer,
  principalOfKey,
  startIamLayer,
} from './iam.js';
import { localPolicies, type PolicySet, type Principal } from './iam-policies.js';
import { type RunningLocalOidc, startLocalOidc } from './oidc.js';
import { type RunningSesStandIn, startSesStandIn } from './ses.js';
import { type RunningStripeStandIn, startStripeStandIn } from './stripe/index.js';
import { localRestrictedKeys, localStripeKey, type StripeKeyHolder } from './stripe/keys.js';
import { deliverStream, type StreamDelivery } from './watch-stream.js';

/**
 * The whole service on one machine: DynamoDB Local, the upstream simulator and
 * the Function URL emulator in front of the same handlers Lambda runs. Used by `npm start`, the
 * integration and contract tests, and the benchmark.
 */

export interface LocalStackOptions {
  /** Emulator port; 0 picks a free one. */
  port?: number;
  host?: string;
  /** Use this DynamoDB instead of starting DynamoDB Local. */
  dynamoEndpoint?: string;
  /** Where DynamoDB Local keeps its data; undefined keeps it in memory. */
  dataDir?: string;
  dynamoPort?: number;
  /** Table names; default the local names (or a prefix of them, so test files can share one DynamoDB). */
  tablePrefix?: string;
  /** A real upstream instead of the simulator. */
  upstreamBaseUrl?: string;
  upstreamApiKey?: string;
  /** Extra environment for the functions (set before their modules load). */
  env?: Record<string, string>;
  /** Per-function overrides of the emulator's settings (e.g. a short timeout in a test). */
  functions?: Partial<Record<EdgeFunction, Partial<EmulatedFunction>>>;
  /** Passed to the emulator: what runs an instance (the conformance suite runs aws-lambda-ric). */
  launcher?: Parameters<typeof startEmulator>[0]['launcher'];
  /** How often expired holds are swept (default: the deployed schedule, SWEEP_INTERVAL_MINUTES). */
  sweepIntervalMs?: number;
  /** How often the balance watch's safety sweep runs (default: as deployed, WATCH_SWEEP_INTERVAL_MINUTES). */
  watchIntervalMs?: number;
  /**
   * Deliver the accounts table's stream to the balance watch (default: on, as deployed). Off for a test
   * that drives the watch's runs itself (`watch()`) and must know which run acted.
   */
  watchStream?: boolean;
  /** How often the payments reconciler runs (default: as deployed, RECONCILE_INTERVAL_MINUTES). */
  reconcileIntervalMs?: number;
  /** How CloudFront reaches each function (default: as deployed, EDGE_ORIGINS); a test may set another. */
  origins?: Partial<Record<EdgeFunction, OriginSetup>>;
  /** DynamoDB's limits in front of DynamoDB Local (dynamodb-limits.ts), scaled by k; off when undefined. */
  limits?: { scale: number };
  /**
   * The SES stand-in's account state (ses.ts): `production` (the default: any recipient) or
   * `sandbox` (a new account's: verified recipients only, each one's identity in the grant).
   */
  sesMode?: 'sandbox' | 'production';
  /** Told of each call the IAM layer or the SES stand-in refuses (a grant the stack lacks). */
  onDenial?: (denial: Denial) => void;
  /** The policies the IAM layer holds calls to (default: as the CDK stacks synthesize them). */
  policies?: PolicySet;
  /** More people the local OpenID provider signs in beside the dev user (a team's tests). */
  oidcUsers?: { email: string; password: string; subject?: string }[];
}

export interface LocalStack {
  /** `http://127.0.0.1:<port>/api/v1`: what an OpenAI client takes as its base URL. */
  baseUrl: string;
  emulator: RunningEmulator;
  /**
   * Where the functions reach DynamoDB: the IAM layer (iam.ts), which checks each call against the
   * caller's role as the CDK stack synthesizes it, then the limits layer when it is on.
   */
  dynamoEndpoint: string;
  /** DynamoDB Local itself (where the operator's CLI reaches it), behind the layers. */
  engineEndpoint: string;
  /** The IAM layer: the refusals it answered, for tests. */
  iam: IamLayer;
  /** A store acting as one principal (its role's credentials), as the sweeper and logged-usage functions run. */
  storeAs(principal: Principal): DynamoStore;
  /** The limits layer, when on: its metrics for tests and the bench. */
  limits: DynamoLimits | undefined;
  client: DynamoDBClient;
  tables: TableNames;
  /** The store over these tables, for the operator's side (accounts, keys, ledger, holds). */
  store: DynamoStore;
  /** The simulator's base URL when it runs. */
  simulatorUrl: string | undefined;
  /**
   * The Stripe stand-in (stripe/index.ts) the payments function and the dashboard call, whose checkout
   * page's Pay button sends its signed events to this stack's `/stripe/webhook`.
   */
  stripe: RunningStripeStandIn;
  /** The SES stand-in (ses.ts) the balance watch sends its e-mails through: its outbox, for tests and `npm start`. */
  ses: RunningSesStandIn;
  /**
   * One run of the balance watch (functions/balance-watch/watch.ts), as its timer runs it, with its
   * role's credentials (DynamoDB through the IAM layer, SES signed), Stripe through the stand-in;
   * `from`: another sender than the verified one (SES refuses it: MessageRejected).
   */
  watch(options?: {
    now?: () => Date;
    from?: string;
  }): Promise<import('../../functions/balance-watch/watch.js').WatchRun>;
  /**
   * The accounts table's stream delivered to the balance watch as its event source mapping does
   * (watch-stream.ts): `idle()` resolves once what was written before it has been handled.
   */
  watchStream: StreamDelivery;
  /**
   * One run of the payments reconciler (functions/reconciler/reconcile.ts), as its timer runs it, with
   * its role's credentials, Stripe through the stand-in; `nowMs` the clock it runs on (default the
   * stand-in's, which a test moves forward).
   */
  reconcile(options?: {
    nowMs?: () => number;
    maxPages?: number;
    pageSize?: number;
  }): Promise<import('../../functions/reconciler/reconcile.js').ReconcileRun>;
  /** The dashboard: `<emulator origin>/dashboard/`, behind the emulated distribution as in AWS. */
  dashboardUrl: string;
  /** The dashboard's table (sessions, OpenID subject links), named with the stack's table prefix. */
  dashboardTable: string;
  /**
   * The local OpenID provider standing in for the dashboard's Cognito user pool (oidc.ts): its issuer,
   * the dashboard's client, and the dev user who signs in on its page.
   */
  oidc: Pick<RunningLocalOidc, 'issuer' | 'clientId' | 'user' | 'users'>;
  stop(): Promise<void>;
}

export function localTableNames(prefix = ''): TableNames {
  return {
    keys: `${prefix}${LOCAL_TABLE_NAMES.keys}`,
    accounts: `${prefix}${LOCAL_TABLE_NAMES.accounts}`,
    ledger: `${prefix}${LOCAL_TABLE_NAMES.ledger}`,
    holds: `${prefix}${LOCAL_TABLE_NAMES.holds}`,
  };
}

/** Each function's handler, by the name it is deployed under (the account function is "models"). */
const HANDLER_DIRS: Record<EdgeFunction, string> = {
  completions: 'completions',
  models: 'account',
  payments: 'payments',
  dashboard: 'dashboard',
};
/** Each function's role, whose credentials Lambda gives it (and the IAM layer checks its calls against). */
const ROLE_OF: Record<EdgeFunction, Principal> = {
  completions: 'completions',
  models: 'models',
  payments: 'payments',
  dashboard: 'dashboard',
};
/**
 * The functions behind the distribution that call Stripe, each with its own restricted key
 * (stripe/keys.ts), as each has its own secret in AWS (lib/infra/stripe-keys.ts).
 */
const STRIPE_KEY_OF: Partial<Record<EdgeFunction, StripeKeyHolder>> = {
  payments: 'payments',
  dashboard: 'dashboard',
};
const stripeKeyEnv = (fn: EdgeFunction): Record<string, string> => {
  const holder = STRIPE_KEY_OF[fn];
  return holder ? { STRIPE_API_KEY: localStripeKey(holder) } : {};
};
/**
 * Instances started with the emulator (Lambda has none before a first request; these keep the first
 * one fast): none of the dashboard's, which no API test calls, and whose first page loads its framework.
 */
const WARM_INSTANCES: Partial<Record<EdgeFunction, number>> = { dashboard: 0 };

/**
 * What the emulator's CloudFront port does with a path, as the distribution does: the function its
 * behaviours send it to (edge-routes.ts, from the route table), reached as that origin is set up.
 */
export function emulatedRoutes(
  options: Pick<LocalStackOptions, 'functions' | 'origins'>,
): EmulatorOptions['routes'] {
  return (Object.keys(HANDLER_DIRS) as EdgeFunction[]).map((fn) => ({
    match: (path: string) => edgeFunctionFor(path) === fn,
    origin: options.origins?.[fn] ?? EDGE_ORIGINS[fn],
    viewerRequest: KEY_CHECKED[fn],
    fn: {
      name: fn,
      module: fileURLToPath(new URL(`../../functions/${HANDLER_DIRS[fn]}/handler.ts`, import.meta.url)),
      timeoutMs: FUNCTION_SETTINGS[fn].timeoutSeconds * 1000,
      memoryMb: FUNCTION_SETTINGS[fn].memoryMb,
      env: { ...credentialEnv(ROLE_OF[fn]), ...stripeKeyEnv(fn) },
      ...(WARM_INSTANCES[fn] !== undefined ? { warmInstances: WARM_INSTANCES[fn] } : {}),
      ...options.functions?.[fn],
    },
  }));
}

/** The TOP_UP_URL a local stack of this process set by default (the dashboard's billing page). */
let defaultedTopUpUrl: string | undefined;

/** Connects to the DynamoDB at `endpoint` if one answers there, else starts DynamoDB Local. */
export async function connectDynamo(opts: {
  endpoint?: string;
  dataDir?: string;
  port?: number;
}): Promise<RunningDynamo> {
  if (opts.endpoint) {
    if (!(await dynamoAnswers(opts.endpoint, 3_000)))
      throw new Error(`no DynamoDB answers at ${opts.endpoint}`);
    return { endpoint: opts.endpoint, stop: async () => {} };
  }
  return startDynamoLocal({
    ...(opts.port !== undefined ? { port: opts.port } : {}),
    ...(opts.dataDir ? { dataDir: opts.dataDir } : {}),
  });
}

export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const stops: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch(() => {});
  };
  try {
    const dynamo = await connectDynamo({
      ...(options.dynamoEndpoint ? { endpoint: options.dynamoEndpoint } : {}),
      ...(options.dataDir ? { dataDir: options.dataDir } : {}),
      ...(options.dynamoPort !== undefined ? { port: options.dynamoPort } : {}),
    });
    stops.push(dynamo.stop);
    const limits = options.limits
      ? await startDynamoLimits({ target: dynamo.endpoint, scale: options.limits.scale })
      : undefined;
    if (limits) stops.push(limits.close);
    const tables = localTableNames(options.tablePrefix);
    const dashboardTable = `${options.tablePrefix ?? ''}${LOCAL_DASHBOARD_TABLE_NAME}`;
    const teamTables = {
      team: `${options.tablePrefix ?? ''}${LOCAL_TEAM_TABLE_NAME}`,
      audit: `${options.tablePrefix ?? ''}${LOCAL_AUDIT_TABLE_NAME}`,
    };
    // Every table the policies name, the dashboard's, the team's and the audit log with the others.
    const policyTables = { ...tables, dashboard: dashboardTable, ...teamTables };
    const policies = options.policies ?? (await localPolicies());
    const iam = await startIamLayer({
      target: limits?.endpoint ?? dynamo.endpoint,
      policies,
      tables: policyTables,
      ...(options.onDenial ? { onDenial: options.onDenial } : {}),
    });
    stops.push(iam.close);
    const dynamoEndpoint = iam.endpoint;
    // The operator's client (an administrator's credentials: the IAM layer does not restrict them).
    const client = localClient(dynamoEndpoint);
    stops.push(async () => client.destroy());
    await ensureTables(client, tables);
    await ensureDashboardTable(client, dashboardTable);
    await ensureTeamTables(client, teamTables);
    const principalStores = new Map<Principal, DynamoStore>();
    const storeAs = (principal: Principal): DynamoStore => {
      let store = principalStores.get(principal);
      if (!store) {
        const principalClient = localClient(dynamoEndpoint, credentialsOf(principal));
        stops.push(async () => principalClient.destroy());
        store = new DynamoStore(principalClient, { ...tables, ...teamTables });
        principalStores.set(principal, store);
      }
      return store;
    };

    let upstreamBaseUrl = options.upstreamBaseUrl;
    let simulatorUrl: string | undefined;
    if (!upstreamBaseUrl) {
      const simulator = await startSimulator({ port: 0 });
      stops.push(simulator.close);
      simulatorUrl = simulator.url;
      upstreamBaseUrl = simulator.url;
    }

    // Stripe, as the payments function and the dashboard reach it: the stand-in, through the real SDK,
    // each function with its own restricted key (STRIPE_KEY_OF, and the watch's and the reconciler's).
    const stripe = await startStripeStandIn({ restrictedKeys: localRestrictedKeys() });
    stops.push(stripe.close);
    // SES, as the balance watch reaches it: the stand-in, through the same signed SendEmail call.
    const ses = await startSesStandIn({
      sender: policies.email.sender,
      identities: [policies.email.identity],
      defaultConfigurationSets: { [policies.email.identity]: policies.email.configurationSet },
      mode: options.sesMode ?? 'production',
      arnPrefix: `arn:aws:ses:${policies.region}:${policies.account}:`,
      authorize: ({ accessKeyId, needed, context }) => {
        const principal = principalOfKey(policies, accessKeyId);
        if (!principal)
          return {
            code: 'UnrecognizedClientException',
            message: 'The security token included in the request is invalid.',
          };
        const denial = deniedCall(policies, principal, needed, context);
        if (denial) options.onDenial?.(denial);
        return denial ? { code: 'AccessDeniedException', message: denial.message } : undefined;
      },
    });
    stops.push(ses.close);

    // The functions read their configuration from the environment at cold start, as in Lambda.
    Object.assign(process.env, {
      DYNAMODB_ENDPOINT: dynamoEndpoint,
      [TABLE_ENV.keys]: tables.keys,
      [TABLE_ENV.accounts]: tables.accounts,
      [TABLE_ENV.ledger]: tables.ledger,
      [TABLE_ENV.holds]: tables.holds,
      [DASHBOARD_TABLE_ENV]: dashboardTable,
      [TEAM_TABLE_ENV]: teamTables.team,
      [AUDIT_TABLE_ENV]: teamTables.audit,
      UPSTREAM_BASE_URL: upstreamBaseUrl,
      STRIPE_API_KEY: stripe.apiKey,
      STRIPE_WEBHOOK_SECRET: stripe.webhookSecret,
      STRIPE_API_BASE: stripe.url,
      SES_ENDPOINT: ses.url,
      ALERT_SENDER: ses.sender,
      ...(options.upstreamApiKey ? { UPSTREAM_API_KEY: options.upstreamApiKey } : {}),
      ...options.env,
    });

    // What the account function's /models states per tier, from the tier configuration (a bad one is
    // reported by the completions function at its cold start).
    try {
      const tiers = process.env.TIERS_CONFIG
        ? parseTierConfig(JSON.parse(process.env.TIERS_CONFIG))
        : parseTierConfig(singleUpstreamConfig(upstreamBaseUrl));
      process.env.MODELS_CATALOG = JSON.stringify(modelCatalog(tiers));
    } catch {
      delete process.env.MODELS_CATALOG;
    }

    // As CloudFront does: a secret header on every request it forwards, which the functions check.
    const originVerifyValue =
      options.env?.ORIGIN_VERIFY_VALUE ?? process.env.ORIGIN_VERIFY_VALUE ?? randomBytes(16).toString('hex');
    process.env.ORIGIN_VERIFY_VALUE = originVerifyValue;
    // The usage lines' signing key (a secret the completions and logged-usage functions read in AWS):
    // the one given (options.env, or the environment: `USAGE_SIGNING_KEY=... npm start`), else a
    // random one, in the environment the functions and this process's log readers share.
    process.env.USAGE_SIGNING_KEY =
      options.env?.USAGE_SIGNING_KEY ?? process.env.USAGE_SIGNING_KEY ?? randomBytes(32).toString('hex');
    // The dashboard's identity provider, standing in for Cognito (oidc.ts). Its client's redirect URI is
    // the dashboard's callback at the emulator's own origin, so it starts once the emulator's port is
    // bound (a port of 0 is known only then) and before any function does: the dashboard reads its
    // origin and provider from its environment at its first request, as in Lambda.
    let oidc: RunningLocalOidc | undefined;
    const dashboardEnv = async (origin: string): Promise<Record<string, string>> => {
      oidc = await startLocalOidc({
        redirectUris: [`${origin}/dashboard/callback`],
        ...(options.host ? { host: options.host } : {}),
        ...(options.oidcUsers ? { users: options.oidcUsers } : {}),
      });
      stops.push((oidc as RunningLocalOidc).close);
      // The 402's topUpUrl: the dashboard's billing page, as the stack sets it where the dashboard is
      // deployed, unless one is given (TOP_UP_URL, or options.env), and not one an earlier stack of
      // this process set (its port is not this one's).
      const givenTopUp =
        options.env?.TOP_UP_URL ??
        (process.env.TOP_UP_URL !== defaultedTopUpUrl ? process.env.TOP_UP_URL : undefined);
      const topUpUrl = givenTopUp || `${origin}/dashboard/billing`;
      if (!givenTopUp) defaultedTopUpUrl = topUpUrl;
      const env = {
        TOP_UP_URL: topUpUrl,
        // With per-key daily caps on (KEY_DAILY_CAPS=on npm start), the cap's 402 names Settings → API.
        ...(keyDailyCapsOn() ? { KEY_CAPS_URL: `${origin}/dashboard/settings/api` } : {}),
        DASHBOARD_ORIGIN: origin,
        OIDC_ISSUER: oidc.issuer,
        OIDC_CLIENT_ID: oidc.clientId,
        OIDC_CLIENT_SECRET: oidc.clientSecret,
      };
      // This process's too, for code run in it (a test's in-process instance reads process.env).
      Object.assign(process.env, env);
      return env;
    };
    // The distribution as the stack builds it: its behaviours, each origin's setup, its viewer-request code.
    const emulator = await startEmulator({
      port: options.port ?? 0,
      ...(options.host ? { host: options.host } : {}),
      originVerifyValue,
      viewerRequest: edgeFunctionCode(),
      ...(options.launcher ? { launcher: options.launcher } : {}),
      routes: emulatedRoutes(options),
      originEnv: dashboardEnv,
    });
    stops.push(emulator.close);
    if (!oidc) throw new Error("the emulator started without the dashboard's identity provider");
    stripe.setWebhookUrl(`${emulator.url}/stripe/webhook`);

    // The hold sweeper on the schedule it has in AWS (an EventBridge rule there), with its role.
    const store = new DynamoStore(client, tables);
    const sweeperStore = storeAs('sweeper');
    // Loaded here, after the environment is set: the sweeper's logger reads LOG_LEVEL when it loads.
    const { sweep } = await import('../../functions/sweeper/sweep.js');
    const sweepTimer = setInterval(
      () => {
        sweep(sweeperStore).catch((error: unknown) =>
          console.error(`hold sweep failed: ${error instanceof Error ? error.message : String(error)}`),
        );
      },
      options.sweepIntervalMs ?? SWEEP_INTERVAL_MINUTES * 60_000,
    );
    sweepTimer.unref();
    stops.push(async () => clearInterval(sweepTimer));

    // The balance watch as deployed, with its role: the accounts table's stream (an event source
    // mapping there), the safety sweep and the outbox on their schedules (EventBridge Scheduler there).
    const watcher = await localWatch(storeAs('balanceWatch'), stripe, ses);
    const watch = watcher.sweep;
    const complain = (what: string) => (error: unknown) =>
      console.error(`${what} failed: ${error instanceof Error ? error.message : String(error)}`);
    const watchStream = deliverStream({
      paused: options.watchStream === false,
      endpoint: dynamoEndpoint,
      credentials: credentialsOf('balanceWatch'),
      streamArn: await streamArnOf(client, TABLES.accounts, tables.accounts),
      invoke: watcher.stream,
      onError: complain('balance watch (stream)'),
    });
    stops.push(watchStream.stop);
    const watchTimers = [
      setInterval(
        () => watch().catch(complain('balance watch sweep')),
        options.watchIntervalMs ?? WATCH_SWEEP_INTERVAL_MINUTES * 60_000,
      ),
      setInterval(
        () => watcher.outbox().catch(complain('balance watch outbox')),
        WATCH_OUTBOX_INTERVAL_MINUTES * 60_000,
      ),
    ];
    for (const timer of watchTimers) timer.unref();
    stops.push(async () => {
      for (const timer of watchTimers) clearInterval(timer);
    });

    // The payments reconciler on its deployed schedule (an EventBridge Scheduler schedule there), with its role.
    const reconcile = await localReconcile(storeAs('reconciler'), stripe);
    const reconcileTimer = setInterval(
      () => {
        reconcile().catch((error: unknown) =>
          console.error(
            `payments reconciler failed: ${error instanceof Error ? error.message : String(error)}`,
          ),
        );
      },
      options.reconcileIntervalMs ?? RECONCILE_INTERVAL_MINUTES * 60_000,
    );
    reconcileTimer.unref();
    stops.push(async () => clearInterval(reconcileTimer));
    return {
      baseUrl: `${emulator.url}/api/v1`,
      emulator,
      dynamoEndpoint,
      engineEndpoint: dynamo.endpoint,
      iam,
      storeAs,
      limits,
      client,
      tables,
      store,
      simulatorUrl,
      stripe,
      ses,
      watch,
      watchStream,
      reconcile,
      dashboardUrl: `${emulator.url}/dashboard/`,
      dashboardTable,
      oidc: { issuer: oidc.issuer, clientId: oidc.clientId, user: oidc.user, users: oidc.users },
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/**
 * The balance watch as its handler runs it (functions/balance-watch/handler.ts), in this process: its
 * role's store (DynamoDB through the IAM layer), SES signed with its role's credentials (the SES
 * stand-in), Stripe through the stand-in with the real SDK and the watch's restricted key. Loaded
 * after the environment is set.
 */
async function localWatch(
  store: DynamoStore,
  stripe: RunningStripeStandIn,
  ses: RunningSesStandIn,
): Promise<{
  sweep: LocalStack['watch'];
  outbox(): Promise<unknown>;
  stream(event: import('aws-lambda').DynamoDBStreamEvent): Promise<void>;
}> {
  const { outboxRun, runWatch, watchAccounts } = await import('../../functions/balance-watch/watch.js');
  const { accountsToWatch } = await import('../../functions/balance-watch/stream.js');
  const { WatchItems } = await import('../../functions/adapters/dynamodb/watch.js');
  const { permanentSesError, sendEmail } = await import('../../functions/adapters/ses.js');
  const { offSessionPayments, stripeClient } = await import('../../functions/payments/stripe-api.js');
  const { sdkLookup } = await import('../../functions/balance-watch/lookup.js');
  const watches = new WatchItems({ client: store.client, tables: store.tables, wire: store.wire });
  const sdk = stripeClient({ apiKey: localStripeKey('watch'), apiBase: stripe.url });
  const payments = offSessionPayments(sdk);
  const credentials = credentialsOf('balanceWatch');
  const billing = process.env.TOP_UP_URL ? { billingUrl: process.env.TOP_UP_URL } : {};
  const deps = (options: { now?: () => Date; from?: string } = {}) => ({
    watches,
    store,
    payments: async () => payments,
    mailer: {
      send: (email: Parameters<typeof sendEmail>[1]) =>
        sendEmail({ url: ses.url, region: 'local', credentials: () => credentials }, email),
      permanent: permanentSesError,
    },
    from: options.from ?? ses.sender,
    now: options.now ?? (() => new Date()),
    ...billing,
    lookUpTopUp: sdkLookup(sdk, {
      store,
      watches,
      now: () => new Date().toISOString(),
      audited: true,
      ...billing,
    }),
  });
  return {
    sweep: (options = {}) => runWatch(deps(options)),
    outbox: () => outboxRun(deps()),
    // As the handler: a failure fails the invocation, and the mapping tries the batch again.
    stream: async (event) => {
      const run = await watchAccounts(deps(), accountsToWatch(event.Records));
      if (run.failures > 0) throw new Error(`balance watch: ${run.failures} failure(s)`);
    },
  };
}

/**
 * The payments reconciler as its handler runs it (functions/reconciler/handler.ts), in this process:
 * its role's store (DynamoDB through the IAM layer), Stripe through the stand-in with the real SDK
 * and the reconciler's restricted key.
 */
async function localReconcile(
  store: DynamoStore,
  stripe: RunningStripeStandIn,
): Promise<LocalStack['reconcile']> {
  const { reconcile } = await import('../../functions/reconciler/reconcile.js');
  const { ledgerCheckpoints } = await import('../../functions/reconciler/checkpoint.js');
  const { stripeEvents } = await import('../../functions/reconciler/stripe-events.js');
  const { WatchItems } = await import('../../functions/adapters/dynamodb/watch.js');
  const { stripeApi, stripeClient } = await import('../../functions/payments/stripe-api.js');
  const watches = new WatchItems({ client: store.client, tables: store.tables, wire: store.wire });
  const sdk = stripeClient({ apiKey: localStripeKey('reconciler'), apiBase: stripe.url });
  return (options = {}) =>
    reconcile({
      payments: {
        store,
        stripe: stripeApi(sdk),
        watches,
        now: () => new Date().toISOString(),
        ...(process.env.TOP_UP_URL ? { billingUrl: process.env.TOP_UP_URL } : {}),
      },
      events: stripeEvents(sdk),
      checkpoints: ledgerCheckpoints(store),
      nowMs: options.nowMs ?? (() => stripe.stripe.nowMs()),
      ...(options.maxPages !== undefined ? { maxPages: options.maxPages } : {}),
      ...(options.pageSize !== undefined ? { pageSize: options.pageSize } : {}),
    });
}
