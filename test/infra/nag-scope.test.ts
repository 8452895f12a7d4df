import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Validations } from 'aws-cdk-lib';
import { PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { AwsSolutionsChecks } from 'cdk-nag';
import { describe, expect, it } from 'vitest';
import { ApiStack } from '../../lib/infra/api-stack.js';
import { PROD_PROPS, resources, synthStages } from './synth-offline.js';

/**
 * cdk-nag's wildcard finding (AwsSolutions-IAM5) is acknowledged on the policies that need it, for
 * the exact wildcard each has, never for the whole stack: a new wildcard anywhere else is a finding.
 */
const stackOf = synthStages();

describe('the wildcard acknowledgement (AwsSolutions-IAM5)', () => {
  it('does not cover a wildcard resource added elsewhere in the stack', () => {
    const outdir = mkdtempSync(join(tmpdir(), 'nag-scope-'));
    const app = new App({ outdir, context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new ApiStack(app, 'Scoped', PROD_PROPS);
    new Role(stack, 'Unreviewed', { assumedBy: new ServicePrincipal('lambda.amazonaws.com') }).addToPolicy(
      new PolicyStatement({ actions: ['s3:GetObject'], resources: ['*'] }),
    );
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    // Synthesis throws on an unacknowledged finding, after writing its report.
    expect(() => app.synth()).toThrow();
    const report = JSON.parse(readFileSync(join(outdir, 'validation-report.json'), 'utf8')) as {
      pluginReports: {
        pluginName: string;
        violations: { ruleName: string; violatingConstructs: { constructPath: string }[] }[];
      }[];
    };
    const nag = report.pluginReports.find((p) => p.pluginName === 'AwsSolutions');
    expect(
      nag?.violations.map((v) => [v.ruleName, v.violatingConstructs.map((r) => r.constructPath)]),
    ).toEqual([['AwsSolutions-IAM5[Resource::*]', ['Scoped/Unreviewed/DefaultPolicy/Resource']]]);
  });

  it.each(['sandbox', 'prod'] as const)(
    "covers only X-Ray's two actions, the one wildcard resource of the stack (%s)",
    (stage) => {
      const wildcards = Object.values(resources(stackOf(stage).template))
        .filter((r) => r.Type === 'AWS::IAM::Policy')
        .flatMap(
          (r) =>
            (
              (r.Properties as Record<string, unknown>).PolicyDocument as {
                Statement: { Action: unknown; Resource: unknown }[];
              }
            ).Statement,
        )
        .filter((s) => [s.Resource].flat().includes('*'));
      expect(wildcards.length).toBeGreaterThan(0);
      for (const statement of wildcards)
        expect(statement.Action).toEqual(['xray:PutTraceSegments', 'xray:PutTelemetryRecords']);
      expect(stackOf(stage).nag?.violations).toEqual([]);
    },
  );
});
