import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { describe, expect, it } from 'vitest';
import { CiBootstrapStack } from '../../lib/infra/ci-bootstrap-stack.js';

describe('the CI bootstrap stack', () => {
  const template = Template.fromStack(
    new CiBootstrapStack(new App(), 'Ci', { repository: 'acme/hosted-model-api' }),
  );

  it("trusts only GitHub's OIDC tokens for this repository's main branch", () => {
    template.hasResourceProperties('AWS::IAM::Role', {
      AssumeRolePolicyDocument: {
        Statement: [
          Match.objectLike({
            Action: 'sts:AssumeRoleWithWebIdentity',
            Condition: {
              StringEquals: {
                'token.actions.githubusercontent.com:aud': 'sts.amazonaws.com',
                'token.actions.githubusercontent.com:sub': 'repo:acme/hosted-model-api:ref:refs/heads/main',
              },
            },
          }),
        ],
      },
    });
  });

  it("creates GitHub's OIDC provider as a native AWS::IAM::OIDCProvider, with no custom resource or Lambda to manage it", () => {
    const providers = template.findResources('AWS::IAM::OIDCProvider');
    expect(Object.values(providers)).toEqual([
      expect.objectContaining({
        Properties: {
          Url: 'https://token.actions.githubusercontent.com',
          ClientIdList: ['sts.amazonaws.com'],
        },
      }),
    ]);
    // The role trusts exactly that provider.
    template.hasResourceProperties('AWS::IAM::Role', {
      AssumeRolePolicyDocument: {
        Statement: [Match.objectLike({ Principal: { Federated: { Ref: Object.keys(providers)[0] } } })],
      },
    });
    const types = Object.values(template.toJSON().Resources as Record<string, { Type: string }>).map(
      (r) => r.Type,
    );
    expect(types.filter((type) => type.startsWith('Custom::'))).toEqual([]);
    expect(types).not.toContain('AWS::Lambda::Function');
    // Nothing may call IAM's OpenIDConnectProvider actions (the custom resource's role could, on every provider).
    expect(JSON.stringify(template.toJSON())).not.toMatch(/OpenIDConnectProvider/);
  });

  it('uses an existing provider by its ARN, creating none', () => {
    const arn = 'arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com';
    const existing = Template.fromStack(
      new CiBootstrapStack(new App(), 'Existing', {
        repository: 'acme/hosted-model-api',
        oidcProviderArn: arn,
      }),
    );
    existing.resourceCountIs('AWS::IAM::OIDCProvider', 0);
    existing.hasResourceProperties('AWS::IAM::Role', {
      AssumeRolePolicyDocument: { Statement: [Match.objectLike({ Principal: { Federated: arn } })] },
    });
  });

  it('may only assume the CDK bootstrap roles and describe the sandbox stack', () => {
    const policies = Object.values(template.findResources('AWS::IAM::Policy'));
    const actions = policies.flatMap((p) =>
      (
        p as { Properties: { PolicyDocument: { Statement: { Action: string | string[] }[] } } }
      ).Properties.PolicyDocument.Statement.flatMap((s) => s.Action),
    );
    expect(
      actions.filter((a) => !a.startsWith('logs:') && !a.startsWith('lambda:') && !a.startsWith('iam:')),
    ).toEqual(expect.arrayContaining(['sts:AssumeRole', 'cloudformation:DescribeStacks']));
    expect(actions).not.toContain('*');
  });

  it('refuses a repository that is not owner/name', () => {
    expect(() => new CiBootstrapStack(new App(), 'Bad', { repository: 'not a repo' })).toThrow(/owner\/name/);
  });

  it("synthesizes under cdk-nag's AwsSolutions checks, as bin/app.ts runs them, with no unacknowledged finding", () => {
    const app = new App();
    new CiBootstrapStack(app, 'Ci', { repository: 'acme/hosted-model-api' });
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    // Synthesis throws on an unacknowledged finding (as `cdk deploy HostedModelApi-ci` would stop).
    const assembly = app.synth();
    const report = JSON.parse(readFileSync(join(assembly.directory, 'validation-report.json'), 'utf8')) as {
      pluginReports: { pluginName: string; conclusion: string; violations: unknown[] }[];
    };
    const nag = report.pluginReports.find((p) => p.pluginName === 'AwsSolutions');
    expect(nag?.conclusion).toBe('success');
    expect(nag?.violations).toEqual([]);
  });
});
