import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { ApiStack, type Stage } from '../lib/infra/api-stack.js';
import { CiBootstrapStack } from '../lib/infra/ci-bootstrap-stack.js';
import { ConfigurationError } from '../lib/infra/configuration-error.js';
import { tiersFromContext } from '../lib/infra/tiers-context.js';

/** The CDK app: `cdk deploy -c stage=sandbox|prod` (README "Deploy to AWS"). */
const app = new App();
try {
  build(app);
} catch (error) {
  // A configuration that cannot work: one line saying what to change, exit 1 (a trace would only
  // point at the check that noticed it). Anything else is a fault, and keeps its stack trace.
  if (!(error instanceof ConfigurationError)) throw error;
  process.stderr.write(`error: ${error.message}\n`);
  process.exit(1);
}

function build(app: App): void {
  const stage = (app.node.tryGetContext('stage') ?? 'sandbox') as Stage;
  if (stage !== 'sandbox' && stage !== 'prod')
    throw new ConfigurationError(`stage must be sandbox or prod, got ${stage}`);
  const context = (name: string): string | undefined => {
    const value = app.node.tryGetContext(name);
    return value === undefined || value === '' ? undefined : String(value);
  };
  const reserved = context('reservedConcurrency');
  // -c tiersFile=<path> or -c tiersConfig=<one-line JSON> (lib/infra/tiers-context.ts).
  const tiersConfig = tiersFromContext(context);
  const number = (name: string) => {
    const raw = context(name);
    if (raw === undefined) return {};
    const value = Number(raw);
    if (!Number.isFinite(value) || value <= 0)
      throw new ConfigurationError(`${name} must be a positive number, got ${raw}`);
    return { [name]: value };
  };

  // -c keyDailyCaps=true turns per-key daily spend caps on (off by default); the stack reads that
  // context itself (lib/infra/service-function.ts keyDailyCapsEnv), as it does the memory sizes.
  new ApiStack(app, `HostedModelApi-${stage}`, {
    stage,
    ...(reserved ? { reservedConcurrency: Number(reserved) } : {}),
    // The overdraft bound's concurrency without a reservation, and the sweeper's reservation of 1 (docs/deploy.md).
    ...number('maxConcurrency'),
    ...(context('reserveSweeper') ? { reserveSweeper: context('reserveSweeper') !== 'false' } : {}),
    ...(tiersConfig ? { tiersConfig } : {}),
    ...(context('topUpUrl') ? { topUpUrl: context('topUpUrl') as string } : {}),
    // A sandbox's dashboard without a custom domain: its distribution's own origin (docs/deploy.md).
    ...(context('dashboardOrigin') ? { dashboardOrigin: context('dashboardOrigin') as string } : {}),
    ...(context('alarmEmail') ? { alarmEmail: context('alarmEmail') as string } : {}),
    ...(context('alarmTopicArn') ? { alarmTopicArn: context('alarmTopicArn') as string } : {}),
    ...(context('originSecretVersion')
      ? { originSecretVersion: context('originSecretVersion') as string }
      : {}),
    ...number('tableMaxReadUnits'),
    ...number('tableMaxWriteUnits'),
    ...number('monthlyBudgetUsd'),
    ...(context('domainName') ? { domainName: context('domainName') as string } : {}),
    ...(context('certificateArn') ? { certificateArn: context('certificateArn') as string } : {}),
    ...(context('waf') ? { waf: context('waf') !== 'false' } : {}),
    ...(context('webAclArn') ? { webAclArn: context('webAclArn') as string } : {}),
    ...number('wafRateLimit'),
    ...(process.env.CDK_DEFAULT_ACCOUNT && process.env.CDK_DEFAULT_REGION
      ? { env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION } }
      : // Environment-agnostic: `cdk deploy` puts it in the CLI's region, which the region checks read.
        process.env.CDK_DEFAULT_REGION
        ? { deployRegion: process.env.CDK_DEFAULT_REGION }
        : {}),
  });
  // The CI deploy role (OIDC), deployed once per account: -c githubRepository=owner/name.
  const repository = context('githubRepository');
  if (repository) {
    new CiBootstrapStack(app, 'HostedModelApi-ci', {
      repository,
      ...(context('githubOidcProviderArn')
        ? { oidcProviderArn: context('githubOidcProviderArn') as string }
        : {}),
    });
  }
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
}
