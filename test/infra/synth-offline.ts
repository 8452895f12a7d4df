import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll } from 'vitest';
import { ApiStack, type ApiStackProps } from '../../lib/infra/api-stack.js';

/** The repository's example tier configuration. */
export const TIERS = readFileSync(new URL('../../config/tiers.example.json', import.meta.url), 'utf8');

/**
 * The custom domain the prod test stage is deployed with: a stack with one has the dashboard
 * (lib/infra/dashboard.ts), so prod's tests see it and the sandbox's see a stack without it.
 */
export const PROD_DOMAIN = {
  domainName: 'api.example.com',
  certificateArn: 'arn:aws:acm:us-east-1:123456789012:certificate/abc',
} as const;

/** The prod stage as the README deploys it, with a custom domain (and so the dashboard). */
export const PROD_PROPS: ApiStackProps = {
  stage: 'prod',
  tiersConfig: TIERS,
  reservedConcurrency: 50,
  alarmEmail: 'ops@example.com',
  monthlyBudgetUsd: 200,
  ...PROD_DOMAIN,
};

export interface Synthesized {
  template: Template;
  /** cdk-nag's AwsSolutions report: its conclusion and unacknowledged findings. */
  nag: { conclusion: string; violations: unknown[] } | undefined;
}

/**
 * A stack's template without bundling the functions (their code is not what these tests read), with
 * cdk-nag's AwsSolutions pack run as `bin/app.ts` runs it.
 */
export function synthOffline(props: ApiStackProps, id = `Test-${props.stage}`): Synthesized {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new ApiStack(app, id, props);
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  const assembly = app.synth();
  const report = JSON.parse(readFileSync(join(assembly.directory, 'validation-report.json'), 'utf8')) as {
    pluginReports: { pluginName: string; conclusion: string; violations: unknown[] }[];
  };
  return {
    template: Template.fromStack(stack),
    nag: report.pluginReports.find((p) => p.pluginName === 'AwsSolutions'),
  };
}

/**
 * The sandbox stack and the prod one (PROD_PROPS), synthesized once before the calling file's tests:
 * the stack of a stage, for those tests to read.
 */
export function synthStages(): (stage: 'sandbox' | 'prod') => Synthesized {
  const stacks: { sandbox?: Synthesized; prod?: Synthesized } = {};
  beforeAll(() => {
    stacks.sandbox = synthOffline({ stage: 'sandbox' });
    stacks.prod = synthOffline(PROD_PROPS);
  }, 240_000);
  return (stage) => {
    const stack = stacks[stage];
    if (!stack) throw new Error(`the ${stage} stack is read before it is synthesized`);
    return stack;
  };
}

export type Resource = { Type: string; Properties?: Record<string, unknown> };
export const resources = (template: Template): Record<string, Resource> =>
  template.toJSON().Resources as Record<string, Resource>;

/** The logical id of the first resource of `type` whose id starts with `prefix`; throws if there is none. */
export function logicalIdOf(synth: Synthesized, type: string, prefix: string): string {
  const id = Object.entries(resources(synth.template)).find(
    ([logicalId, r]) => r.Type === type && logicalId.startsWith(prefix),
  )?.[0];
  if (!id) throw new Error(`no ${type} ${prefix}*`);
  return id;
}
