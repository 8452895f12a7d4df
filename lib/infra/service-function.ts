import { fileURLToPath } from 'node:url';
import type { Duration, RemovalPolicy } from 'aws-cdk-lib';
import { Architecture, Runtime, Tracing } from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, type RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { acknowledgeXrayWildcard } from './nag-suppressions.js';
import { TOKENIZER } from './tokenizer-package.js';

/** The repository root, for the function entry points (infrastructure never imports runtime code). */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const repoFile = (path: string) => `${REPO_ROOT}${path}`;

/**
 * The esbuild settings of every function bundle, shared with the conformance suite
 * (test/conformance), which runs the same bundles under AWS's runtime interface client.
 */
export const BUNDLE_SETTINGS = {
  format: 'esm',
  target: 'node22',
  minify: true,
  sourceMap: true,
  mainFields: ['module', 'main'],
  // ESM bundles of CommonJS dependencies still call require().
  banner: "import{createRequire as __cr}from'node:module';const require=__cr(import.meta.url);",
  // The AWS SDK is bundled (a pinned, tested version; faster cold starts than the runtime's copy).
  // The tokenizer (several MB of BPE ranks) is only needed when an upstream reports no usage:
  // it stays out of the main bundle, so a cold start does not parse it, and ships beside it
  // as its own package (lib/infra/tokenizer-package.ts), loaded on first use.
  externalModules: [TOKENIZER],
  alias: {
    // Lambda gives a function its credentials in the environment: the SDK's default provider chain is
    // replaced by that one link (functions/adapters/lambda-credentials.ts says what it saves).
    '@aws-sdk/credential-provider-node': repoFile('functions/adapters/lambda-credentials.ts'),
    // node:http and node:https as CommonJS, not through Node's ESM facade, which loads undici
    // (functions/shared/builtins/http.cjs): the completions bundle imported 11 ms faster on Node 22.
    'node:http': repoFile('functions/shared/builtins/http.cjs'),
    http: repoFile('functions/shared/builtins/http.cjs'),
    'node:https': repoFile('functions/shared/builtins/https.cjs'),
    https: repoFile('functions/shared/builtins/https.cjs'),
  },
} as const;

/**
 * The esbuild options that build `entry` (relative to the repository) as the stack bundles it, into
 * memory (`write: false`): the bundle-size test, the bench's bundle weights and the local runtime
 * client's bundles use these, so each measures or runs what is deployed.
 */
export function bundleBuildOptions(entry: string) {
  return {
    entryPoints: [repoFile(entry)],
    absWorkingDir: REPO_ROOT,
    bundle: true,
    write: false as const,
    outfile: 'index.mjs',
    format: BUNDLE_SETTINGS.format,
    platform: 'node' as const,
    target: BUNDLE_SETTINGS.target,
    minify: BUNDLE_SETTINGS.minify,
    mainFields: [...BUNDLE_SETTINGS.mainFields],
    banner: { js: BUNDLE_SETTINGS.banner },
    external: [...BUNDLE_SETTINGS.externalModules],
    alias: { ...BUNDLE_SETTINGS.alias },
    logLevel: 'silent' as const,
  };
}

/**
 * The most each function's bundle may weigh: its minified `index.mjs` in KiB, the source map beside it and
 * the lazily loaded tokenizer package apart. Every cold start parses, compiles and runs what its bundle
 * holds before the first request is even read, and on Lambda every concurrent request of a burst is a
 * cold start of its own (the move to undici had doubled the bundles, completions 446 -> 1,004 KiB,
 * models 284 -> 826 KiB, their import +90 and +74 ms over bare Node 22). test/infra/bundle-size.test.ts
 * builds each deployed entry with BUNDLE_SETTINGS and fails past its bound (and for an entry without
 * one), so a dependency that adds weight is a decision, not an accident. Each bound is the size last
 * measured with a few KiB for small edits: with every DynamoDB and Secrets Manager call signed and sent
 * directly (functions/adapters/dynamodb/wire.ts, functions/adapters/secrets-manager.ts) no function
 * bundles any of the AWS SDK (about 214 KiB of each before, docs/performance.md): completions 282.8
 * (484 before), models 106.6 (308), sweeper 183.7 (373), logged-usage 192.6 (394), simulator 11.5,
 * payments 340.7 (545). The targets were completions 350 and models 200.
 */
export const BUNDLE_BOUNDS_KIB: Readonly<Record<string, number>> = {
  // Every bound below grew 9-10 KiB on 2026-12-07 with the team store (members, invitations, the audit
  // log: functions/adapters/dynamodb/team.ts 3.7 KiB, invitations.ts 2.5, audit.ts 2.2, the audit Put
  // of the key writes 2): every function bundles the whole DynamoDB store. Measured: completions 309.8,
  // account 131.2, sweeper 207.8, logged-usage 216.9, payments 379.6, dashboard 490.0, balance watch
  // 381.0, reconciler 377.2, sign-up guard 115.1 KiB. Keeping the team's parts out of the request
  // path's bundle would take a store split by function (a store of the dashboard's own): done for the
  // request path on 2026-12-08, below.
  // Each of these four grew 1.4-2.8 KiB on 2026-11-28 with per-key daily caps (the key's day counter in
  // the store's settlement, hold and release; billing/key-cap.ts): completions 290.8, account 113.5,
  // sweeper 190.7, logged-usage 199.4 KiB measured. Measured again on 2026-12-07 after the caps' setting,
  // the finish chunk held back for a stream's usage (completions/relay-last.ts), the key-name rule and
  // the store's active-key count and one-pass key totals: completions 297.3, account 118.7, sweeper
  // 195.3, logged-usage 204.3 KiB (not attributed change by change).
  // Completions: 283.2 KiB measured on 2026-12-08 (311.9 before) once it bundles only the store's parts
  // it calls (core/store-request.ts RequestPathStore; adapters/dynamodb/request-store.ts: accounts,
  // holds, the ledger and its transfers), not keys, corrections, activity, the dashboard's items, the
  // team, invitations or the audit log, which the other functions' DynamoStore adds.
  'functions/completions/handler.ts': 285,
  // Account: 132.5 KiB measured on 2026-12-08 (the DynamoStore split adds its base class, 0.2 KiB).
  'functions/account/handler.ts': 133,
  'functions/sweeper/handler.ts': 210,
  'functions/logged-usage/handler.ts': 219,
  'functions/simulator/handler.ts': 12,
  // Stripe's webhook (functions/payments/): the stripe SDK is most of it (240 of 340.7 KiB measured).
  // Never on an API request's path; Stripe waits for its answer and retries a slow one. 356.5 KiB
  // measured on 2026-11-28 with the balance watch's items (a saved card, an auto top-up's outcome: 6.8
  // KiB of it, functions/adapters/dynamodb/watch.ts and functions/core/watch.ts).
  // 366.6 KiB on 2026-12-07 with the origin header's check and the pinned API version.
  // 370.9 KiB on 2026-12-07 with an auto top-up's invoice (functions/payments/invoicing.ts, 1 KiB).
  // 384.6 KiB after the team store and the invoices were merged together (2026-12-07).
  // 387.2 KiB measured once the team store, the invoices and the stream's watch were all merged (2026-12-07).
  'functions/payments/handler.ts': 390,
  // The dashboard (functions/dashboard/): 447.1 KiB measured on 2026-11-28 with its Activity page
  // (426.5 before it), the stripe SDK 240 of it (Checkout), hono 42, oauth4webapi 25. Never on an API
  // request's path.
  // 461.8 KiB measured on 2026-11-28 with the Billing page's alert and auto top-up settings (6.2 KiB of
  // watch items and their port, and the page's forms).
  // 477.8 KiB on 2026-12-07 with Post/Redirect/Get and its one-time notice, the fresh sign-in, Hono's
  // compress middleware and the thank-you page's confirmation.
  // 514.6 KiB on 2026-12-07 with Billing's documents: the billing profile's form and its check
  // (zod/mini 16.1 KiB; zod's classic API would have been 83), the invoices list, the monthly
  // statement's page and CSV, and the invoicing port (about 20 KiB of code in all). 519.1 KiB
  // measured after main's changes of the same day were merged in (the restricted Stripe keys' config).
  // 521.8 KiB on 2026-12-07 with the team pages (team-routes.tsx 6.0, members-page.tsx 5.3,
  // audit-page.tsx 3.6, invite-routes.tsx 3.1, team-access.tsx 2.7, audit-routes.tsx 1.2 KiB; the keys
  // page's rename and "created by", the member read and permission check of every page: about 24 KiB in
  // all) and the Overview with its chart (overview.tsx 2.8, chart.tsx 2.0 KiB).
  // 559.1 KiB with both (Billing's documents and the team pages), merged on 2026-12-07.
  // 563.0 KiB measured once the team store, the invoices and the stream's watch were all merged (2026-12-07).
  'functions/dashboard/handler.ts': 567,
  // The balance watch (functions/balance-watch/): 353.5 KiB measured on 2026-11-28, the stripe SDK
  // most of it (its off-session PaymentIntent), its own code 11.9 (the watch items, the SES call, the
  // state machines). Run by the accounts table's stream and its schedules, never on an API request's path.
  // 361.7 KiB measured on 2026-12-07 with the lookup of an auto top-up whose event was lost (the
  // webhook's applyEvent, functions/payments/events.ts, 8.2 KiB of it).
  // 368.0 KiB on 2026-12-07 with dead letters and the permanent off-session refusals.
  // 372.3 KiB on 2026-12-07 with an auto top-up's invoice, which its lookup's applyEvent may make.
  // 385.6 KiB after the team store and the invoices were merged together (2026-12-07).
  // 389.6 KiB measured once the team store, the invoices and the stream's watch were all merged (2026-12-07).
  'functions/balance-watch/handler.ts': 393,
  // The payments reconciler (functions/reconciler/): 359.2 KiB measured on 2026-12-07, the stripe SDK
  // most of it (the events list, the PaymentIntent and refunds reads). Run every 10 minutes by a
  // schedule, never on an API request's path.
  // 364.2 KiB on 2026-12-07 after the merges of that day.
  // 368.5 KiB on 2026-12-07 with an auto top-up's invoice, which its applyEvent may make.
  // 381.8 KiB after the team store and the invoices were merged together (2026-12-07).
  // 384.4 KiB measured once the team store, the invoices and the stream's watch were all merged (2026-12-07).
  'functions/reconciler/handler.ts': 387,
  // Cognito's pre-sign-up trigger (functions/sign-up-guard/): 102.7 KiB measured on 2026-12-07, its
  // counters' conditional transaction through the store's wire. Run at a sign-up, never on an API request.
  'functions/sign-up-guard/handler.ts': 117,
};

/**
 * The functions run without NODE_OPTIONS=--enable-source-maps. It cost 19-26 ms of every cold start and
 * 11-16 MiB of RSS per instance (npm run bench, import table), and it makes every stack trace that is
 * formatted (each error logged) map its positions. Stack traces in the logs name positions in the
 * minified bundle; to read them through the source map (index.mjs.map, in the deployment package), set
 * NODE_OPTIONS=--enable-source-maps on the function while investigating (docs/operations.md, "Stack traces").
 * The local aws-lambda-ric launcher and the bench run the bundles the same way.
 */
export const FUNCTION_NODE_OPTIONS = '';

/**
 * The rest of the functions' process environment as deployed (also set by the launcher and the bench).
 * MALLOC_TRIM_THRESHOLD_: glibc gives freed memory back to the system above 128 KiB instead of keeping
 * it for later. A usage estimate loads the tokenizer, freeing most of what that took (measured when its
 * ranks were 2.7 MB of JavaScript, before lib/infra/tokenizer-package.ts); at 160 MB's heap limits an instance's peak RSS after 1,000 requests with 20 estimates
 * measured 147 MiB without it and 131-134 MiB with it, for the same CPU per request (7.9-8.5 ms, 30 ms
 * apart, both ways).
 */
export const FUNCTION_PROCESS_ENV: Readonly<Record<string, string>> = {
  MALLOC_TRIM_THRESHOLD_: '131072',
};

/** Lambda's bounds on memory size, in MB. */
const MEMORY_MIN_MB = 128;
const MEMORY_MAX_MB = 10_240;

/**
 * The memory size of the function with construct id `id`: the CDK context value
 * `<id>MemorySize` (e.g. `cdk deploy -c completionsMemorySize=512`) when set, else `fallback`.
 */
function memorySizeFor(scope: Construct, id: string, fallback: number): number {
  const key = `${id.charAt(0).toLowerCase()}${id.slice(1)}MemorySize`;
  const raw: unknown = scope.node.tryGetContext(key);
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < MEMORY_MIN_MB || value > MEMORY_MAX_MB)
    throw new Error(
      `${key} must be a whole number of MB from ${MEMORY_MIN_MB} to ${MEMORY_MAX_MB}, got ${String(raw)}`,
    );
  return value;
}

/**
 * Per-key daily spend caps, off unless the deploy turns them on with `-c keyDailyCaps=true` (the
 * product's contract has no per-key budget: the caller tracks `usage.cost` itself). On, the functions
 * that read a cap (completions, the account function's /key, the dashboard) get KEY_DAILY_CAPS=on
 * (functions/shared/env.ts reads it); off, none of them is told anything. Read from the context of the
 * app `scope` is in; `true` or `false`, anything else refused by name.
 */
export function keyDailyCapsEnv(scope: Construct): Record<string, string> {
  const raw: unknown = scope.node.tryGetContext('keyDailyCaps');
  if (raw === undefined || raw === '' || raw === false || raw === 'false') return {};
  if (raw === true || raw === 'true') return { KEY_DAILY_CAPS: 'on' };
  throw new Error(`keyDailyCaps must be true or false, got ${String(raw)}`);
}

export interface ServiceFunctionProps {
  /** Entry file relative to the repository root, e.g. `functions/completions/handler.ts`. */
  entry: string;
  memorySize: number;
  timeout: Duration;
  environment?: Record<string, string>;
  reservedConcurrentExecutions?: number;
  /** Where asynchronous invocations that fail after Lambda's retries go (a dead-letter queue). */
  deadLetterQueue?: IQueue;
  logRetention: RetentionDays;
  removalPolicy: RemovalPolicy;
}

/**
 * What every function shares: Node.js 22 on arm64, an ESM bundle built by the local esbuild
 * (minified, with source maps), its own log group with retention, and X-Ray tracing.
 */
export class ServiceFunction extends Construct {
  readonly fn: NodejsFunction;
  readonly logGroup: LogGroup;

  constructor(scope: Construct, id: string, props: ServiceFunctionProps) {
    super(scope, id);
    this.logGroup = new LogGroup(this, 'Logs', {
      retention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    this.fn = new NodejsFunction(this, 'Function', {
      entry: `${REPO_ROOT}${props.entry}`,
      handler: 'handler',
      projectRoot: REPO_ROOT,
      depsLockFilePath: `${REPO_ROOT}package-lock.json`,
      runtime: Runtime.NODEJS_22_X,
      architecture: Architecture.ARM_64,
      memorySize: memorySizeFor(scope, id, props.memorySize),
      timeout: props.timeout,
      ...(props.reservedConcurrentExecutions !== undefined
        ? { reservedConcurrentExecutions: props.reservedConcurrentExecutions }
        : {}),
      ...(props.deadLetterQueue ? { deadLetterQueue: props.deadLetterQueue } : {}),
      logGroup: this.logGroup,
      tracing: Tracing.ACTIVE,
      environment: {
        ...(FUNCTION_NODE_OPTIONS ? { NODE_OPTIONS: FUNCTION_NODE_OPTIONS } : {}),
        ...FUNCTION_PROCESS_ENV,
        POWERTOOLS_SERVICE_NAME: 'hosted-model-api',
        POWERTOOLS_METRICS_NAMESPACE: 'HostedModelApi',
        ...props.environment,
      },
      bundling: {
        format: OutputFormat.ESM,
        target: BUNDLE_SETTINGS.target,
        minify: BUNDLE_SETTINGS.minify,
        sourceMap: BUNDLE_SETTINGS.sourceMap,
        mainFields: [...BUNDLE_SETTINGS.mainFields],
        banner: BUNDLE_SETTINGS.banner,
        forceDockerBundling: false,
        externalModules: [...BUNDLE_SETTINGS.externalModules],
        esbuildArgs: {
          '--alias': Object.entries(BUNDLE_SETTINGS.alias).map(([name, path]) => `${name}=${path}`),
        },
        commandHooks: {
          beforeBundling: () => [],
          beforeInstall: () => [],
          afterBundling: (inputDir: string, outputDir: string) => [
            `"${inputDir}/node_modules/.bin/tsx" "${inputDir}/lib/infra/tokenizer-package.ts" "${outputDir}"`,
          ],
        },
      },
    });
    // Active tracing's statement: the one wildcard resource, acknowledged on this function's policy only.
    acknowledgeXrayWildcard(this.fn);
  }
}
