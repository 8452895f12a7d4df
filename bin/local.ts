import { dirname, join } from 'node:path';
import { GENERATION_USAGE_MESSAGE } from '../functions/billing/usage-line.js';
import { keyDailyCapsOn } from '../functions/shared/env.js';
import { createAccount, createKey, getAccount } from '../lib/admin/operations.js';
import { bundle, bundleFunctions, ricLauncher, runtimeInstalled } from '../lib/local/aws-lambda-ric.js';
import { JavaMissingError } from '../lib/local/dynamodb-local.js';
import { type RequestDone, workerLauncherWithOutput } from '../lib/local/emulator.js';
import { dynamoLimitsScale, emulatorPort, localDynamoSettings } from '../lib/local/settings.js';
import { startLocalStack } from '../lib/local/stack.js';

/**
 * `npm start`: the service on http://127.0.0.1:8787/api/v1 with DynamoDB Local (data under .data/),
 * the upstream simulator and the Function URL emulator. Ctrl-C stops everything it started.
 * With LOCAL_RUNTIME=aws-lambda-ric the functions run as Lambda runs them: their bundles, built at
 * start into .cache/bundles, each instance a Node 22 process under AWS's runtime client (install it
 * once with scripts/install-lambda-runtime.sh).
 *
 * The console shows one short line a request (RequestConsole below); LOG_FORMAT=json (or
 * LOG_LEVEL=DEBUG) shows the functions' JSON log lines instead, as CloudWatch Logs receives them.
 */
const DEV_ACCOUNT = 'dev';
// Node.js 20 runs locally (Lambda runs 22): keep the SDK's multi-line notice about it out of the output.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

async function main(): Promise<void> {
  const env = process.env;
  const shortConsole = requestConsole(env);
  // Per-key daily spend caps (off unless KEY_DAILY_CAPS=on): a bad value is refused here, before anything starts.
  const keyCaps = keyDailyCapsOn(env);
  const settings = localDynamoSettings(env);
  const dynamo = env.DYNAMODB_ENDPOINT
    ? { endpoint: env.DYNAMODB_ENDPOINT }
    : await settings.connectOptions();
  const limitsScale = dynamoLimitsScale(env);
  const stack = await startLocalStack({
    port: emulatorPort(env),
    ...(limitsScale !== undefined ? { limits: { scale: limitsScale } } : {}),
    ...(await launcherFor(env.LOCAL_RUNTIME, shortConsole)),
    ...(dynamo.endpoint
      ? { dynamoEndpoint: dynamo.endpoint }
      : { dataDir: settings.dynamoDataDir, dynamoPort: settings.port }),
    ...(env.UPSTREAM_BASE_URL ? { upstreamBaseUrl: env.UPSTREAM_BASE_URL } : {}),
    ...(env.UPSTREAM_API_KEY ? { upstreamApiKey: env.UPSTREAM_API_KEY } : {}),
    // A call the stack's IAM policy would refuse in AWS is refused here too, and said loudly.
    onDenial: (denial) => console.error(`IAM: AccessDenied (${denial.principal}): ${denial.message}`),
  });
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    console.log('\nstopping...');
    await stack.stop();
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);

  if (shortConsole) stack.emulator.onRequestDone((done) => shortConsole.requestDone(done));
  const ctx = { store: stack.store };
  console.log(`hosted-model-api listening on ${stack.baseUrl}`);
  console.log(
    `  DynamoDB:  ${stack.engineEndpoint}${env.DYNAMODB_ENDPOINT ? '' : ` (data in ${settings.dynamoDataDir})`}; the functions' calls held to their IAM roles at ${stack.dynamoEndpoint}`,
  );
  if (stack.limits)
    console.log(
      `  limits:    DynamoDB's per-partition limits at 1/${stack.limits.scale} (${1000 / stack.limits.scale} write, ${3000 / stack.limits.scale} read units a second per partition key)`,
    );
  console.log(
    `  upstream:  ${stack.simulatorUrl ? `simulator at ${stack.simulatorUrl}` : env.UPSTREAM_BASE_URL}`,
  );
  console.log(
    `  dashboard: ${stack.dashboardUrl}  (sign in as ${stack.oidc.user.email}, password "${stack.oidc.user.password}": the local OpenID provider at ${stack.oidc.issuer} stands in for Cognito; Stripe's checkout is the stand-in at ${stack.stripe.url})`,
  );
  console.log(
    `  e-mail:    ${stack.ses.url}/  (the SES stand-in's outbox: low-balance alerts, auto top-up notices)`,
  );
  console.log(
    keyCaps
      ? '  key caps:  per-key daily spend caps on (KEY_DAILY_CAPS=on; npm run admin needs it too)'
      : '  key caps:  off, as the product contract has it (KEY_DAILY_CAPS=on npm start turns them on)',
  );

  if (!(await getAccount(ctx, DEV_ACCOUNT))) {
    await createAccount(ctx, DEV_ACCOUNT, '5');
    const { key } = await createKey(ctx, DEV_ACCOUNT, 'development');
    console.log(`
First start: created account "${DEV_ACCOUNT}" with $5.00 of credits and this API key.
It is shown only this once; keep it (e.g. export SVC_API_KEY=...):

  ${key}

Try it:

  curl ${stack.baseUrl}/chat/completions -H "Authorization: Bearer ${key}" -H "Content-Type: application/json" -d '{"model":"svc-fast","messages":[{"role":"user","content":"Hello"}]}'

Or with the OpenAI SDK (npm install openai):

  import OpenAI from 'openai';
  const client = new OpenAI({ baseURL: '${stack.baseUrl}', apiKey: process.env.SVC_API_KEY });
  console.log((await client.chat.completions.create({ model: 'svc-fast', messages: [{ role: 'user', content: 'Hello' }] })).choices[0].message.content);
`);
  } else {
    console.log(
      `\nAccount "${DEV_ACCOUNT}" exists; make another key with: npm run --silent admin -- key create ${DEV_ACCOUNT} --name <label>`,
    );
  }
  // The dashboard's dev user owns the dev account: linked as a first sign-in links a user, once (a
  // sign-in would otherwise make the user a new, empty account of its own).
  const { user } = stack.oidc;
  const linked = await stack.store.linkUser(user.subject, DEV_ACCOUNT, new Date().toISOString());
  console.log(
    linked === DEV_ACCOUNT
      ? `Dashboard: ${user.email} signs in to account "${DEV_ACCOUNT}".`
      : `Dashboard: ${user.email} signs in to account "${linked}" (linked at an earlier start).`,
  );
  console.log('Ctrl-C stops the service and DynamoDB Local.');
}

async function launcherFor(runtime: string | undefined, shortConsole: RequestConsole | undefined) {
  if (!runtime || runtime === 'worker')
    return shortConsole
      ? { launcher: workerLauncherWithOutput((...line) => shortConsole.functionLine(...line)) }
      : {};
  if (runtime !== 'aws-lambda-ric')
    throw new Error(`LOCAL_RUNTIME must be "worker" (the default) or "aws-lambda-ric", not "${runtime}"`);
  if (!runtimeInstalled())
    throw new Error('LOCAL_RUNTIME=aws-lambda-ric: run scripts/install-lambda-runtime.sh first');
  const built = await bundleFunctions('.cache/bundles');
  // The dashboard's beside them (bundleFunctions builds the API's and the webhook's).
  const bundles = {
    ...built,
    dashboard: await bundle('functions/dashboard/handler.ts', join(dirname(built.models), 'dashboard')),
  };
  console.log('  functions: bundles in .cache/bundles, run by aws-lambda-ric on Node 22');
  // LAMBDA_CPU_PROF_DIR: each instance writes a V8 CPU profile there when the service stops.
  const cpuProfileDir = process.env.LAMBDA_CPU_PROF_DIR;
  return { launcher: ricLauncher(bundles, 'inherit', cpuProfileDir ? { cpuProfileDir } : {}) };
}

/**
 * The console's short form, unless LOG_FORMAT=json or LOG_LEVEL=DEBUG asks for the functions' JSON
 * lines (undefined then); the functions run under aws-lambda-ric keep their own output.
 */
function requestConsole(env: NodeJS.ProcessEnv): RequestConsole | undefined {
  const format = env.LOG_FORMAT || 'short';
  if (format !== 'short' && format !== 'json')
    throw new Error(`LOG_FORMAT must be "short" (the default) or "json", not "${format}"`);
  const level = (env.LOG_LEVEL || 'INFO').toUpperCase();
  if (format === 'json' || level === 'DEBUG' || level === 'TRACE' || env.LOCAL_RUNTIME === 'aws-lambda-ric')
    return undefined;
  // Above INFO the functions log no usage line: a completion's line does not wait for one.
  return new RequestConsole(level === 'INFO');
}

/** What a completion's line says of its bill, from its `generation usage` line. */
interface UsageSummary {
  tier: string;
  tokens: string;
  billedUsd: string;
}

/** How long a completion's line waits for its usage line (logged as its settlement starts). */
const USAGE_WAIT_MS = 5_000;

/**
 * The console as a developer watches it: one short line a request, e.g.
 * `POST /api/v1/chat/completions 200 svc-fast 7+30 tokens $0.00004535 63 ms gen-...` (a completion's
 * tier, tokens and billed cost from its `generation usage` line), and a function's warning or error as
 * one line. The JSON lines themselves (a usage line is about 1,000 characters) are what the deployed
 * stack's log subscription and metric filters read; LOG_FORMAT=json shows them here.
 */
class RequestConsole {
  /** Usage lines by generation id, until their request's line takes them. */
  private readonly usage = new Map<string, UsageSummary>();
  private readonly waiting = new Map<string, (usage: UsageSummary) => void>();

  constructor(private readonly usageLogged: boolean) {}

  /** A line a function wrote. */
  functionLine(fn: string, stream: 'stdout' | 'stderr', line: string): void {
    const entry = jsonObject(line);
    if (!entry) {
      // Not a log line (a crash's trace, a stray console.log): as it was written.
      (stream === 'stderr' ? process.stderr : process.stdout).write(`${line}\n`);
      return;
    }
    if (entry.message === GENERATION_USAGE_MESSAGE) {
      this.usageLine(entry);
      return;
    }
    const level = String(entry.level ?? '');
    if (level === 'WARN' || level === 'ERROR' || level === 'CRITICAL') {
      const error = entry.error as { message?: unknown } | string | undefined;
      const why = typeof error === 'string' ? error : error?.message;
      console.error(
        oneLine(`${fn} ${level}: ${String(entry.message ?? '')}${why ? ` (${String(why)})` : ''}`),
      );
    }
    // Any other JSON line (INFO and below, metrics): in the JSON log only.
  }

  /** A request's line, once its response is done (a completion's, with its usage line's figures). */
  async requestDone(done: RequestDone): Promise<void> {
    const usage =
      done.generationId && done.status === 200 && this.usageLogged
        ? await this.usageOf(done.generationId)
        : undefined;
    const bill = usage ? ` ${usage.tier} ${usage.tokens} tokens $${usage.billedUsd}` : '';
    console.log(
      oneLine(
        `${done.method} ${done.path} ${done.status}${bill} ${done.ms} ms${done.generationId ? ` ${done.generationId}` : ''}`,
      ),
    );
  }

  private usageLine(entry: Record<string, unknown>): void {
    const record = (entry.record ?? {}) as Record<string, unknown>;
    const id = String(record.generationId ?? '');
    const summary: UsageSummary = {
      tier: String(record.tier ?? '?'),
      tokens: `${String(record.promptTokens ?? '?')}+${String(record.completionTokens ?? '?')}${record.estimated === true ? ' (estimated)' : ''}`,
      billedUsd: String(entry.billedUsd ?? '?'),
    };
    const waiter = this.waiting.get(id);
    if (waiter) {
      waiter(summary);
      return;
    }
    this.usage.set(id, summary);
    // A line no request takes (one made through a bare Function URL port) is not kept.
    setTimeout(() => this.usage.delete(id), USAGE_WAIT_MS * 2).unref();
  }

  private usageOf(generationId: string): Promise<UsageSummary | undefined> {
    const known = this.usage.get(generationId);
    this.usage.delete(generationId);
    if (known) return Promise.resolve(known);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiting.delete(generationId);
        resolve(undefined);
      }, USAGE_WAIT_MS);
      this.waiting.set(generationId, (usage) => {
        clearTimeout(timer);
        this.waiting.delete(generationId);
        resolve(usage);
      });
    });
  }
}

/** The JSON object a log line is, or undefined. */
function jsonObject(line: string): Record<string, unknown> | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** A console line: control characters escaped, at most 200 characters. */
function oneLine(text: string): string {
  let clean = '';
  for (const c of text) {
    const code = c.charCodeAt(0);
    clean += code < 0x20 || code === 0x7f ? `\\x${code.toString(16).padStart(2, '0')}` : c;
  }
  return clean.length > 200 ? `${clean.slice(0, 197)}...` : clean;
}

main().catch((error: unknown) => {
  if (error instanceof JavaMissingError) {
    console.error(error.message);
  } else {
    console.error(`failed to start: ${(error as Error).message}`);
  }
  process.exit(1);
});
