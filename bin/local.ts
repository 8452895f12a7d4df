import { createAccount, createKey, getAccount } from '../lib/admin/operations.js';
import { bundleFunctions, ricLauncher, runtimeInstalled } from '../lib/local/aws-lambda-ric.js';
import { JavaMissingError } from '../lib/local/dynamodb-local.js';
import { dynamoLimitsScale, emulatorPort, localDynamoSettings } from '../lib/local/settings.js';
import { startLocalStack } from '../lib/local/stack.js';

/**
 * `npm start`: the service on http://127.0.0.1:8787/api/v1 with DynamoDB Local (data under .data/),
 * the upstream simulator and the Function URL emulator. Ctrl-C stops everything it started.
 * With LOCAL_RUNTIME=aws-lambda-ric the functions run as Lambda runs them: their bundles, built at
 * start into .cache/bundles, each instance a Node 22 process under AWS's runtime client (install it
 * once with scripts/install-lambda-runtime.sh).
 */
const DEV_ACCOUNT = 'dev';
// Node.js 20 runs locally (Lambda runs 22): keep the SDK's multi-line notice about it out of the output.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

async function main(): Promise<void> {
  const env = process.env;
  const settings = localDynamoSettings(env);
  const dynamo = env.DYNAMODB_ENDPOINT
    ? { endpoint: env.DYNAMODB_ENDPOINT }
    : await settings.connectOptions();
  const limitsScale = dynamoLimitsScale(env);
  const stack = await startLocalStack({
    port: emulatorPort(env),
    ...(limitsScale !== undefined ? { limits: { scale: limitsScale } } : {}),
    ...(await launcherFor(env.LOCAL_RUNTIME)),
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
  console.log('Ctrl-C stops the service and DynamoDB Local.');
}

async function launcherFor(runtime: string | undefined) {
  if (!runtime || runtime === 'worker') return {};
  if (runtime !== 'aws-lambda-ric')
    throw new Error(`LOCAL_RUNTIME must be "worker" (the default) or "aws-lambda-ric", not "${runtime}"`);
  if (!runtimeInstalled())
    throw new Error('LOCAL_RUNTIME=aws-lambda-ric: run scripts/install-lambda-runtime.sh first');
  const bundles = await bundleFunctions('.cache/bundles');
  console.log('  functions: bundles in .cache/bundles, run by aws-lambda-ric on Node 22');
  // LAMBDA_CPU_PROF_DIR: each instance writes a V8 CPU profile there when the service stops.
  const cpuProfileDir = process.env.LAMBDA_CPU_PROF_DIR;
  return { launcher: ricLauncher(bundles, 'inherit', cpuProfileDir ? { cpuProfileDir } : {}) };
}

main().catch((error: unknown) => {
  if (error instanceof JavaMissingError) {
    console.error(error.message);
  } else {
    console.error(`failed to start: ${(error as Error).message}`);
  }
  process.exit(1);
});
