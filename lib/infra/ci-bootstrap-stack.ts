import { CfnOutput, Duration, Stack, type StackProps } from 'aws-cdk-lib';
import { OpenIdConnectProvider, PolicyStatement, Role, WebIdentityPrincipal } from 'aws-cdk-lib/aws-iam';
import type { Construct } from 'constructs';

export interface CiBootstrapStackProps extends StackProps {
  /** `owner/name` of the GitHub repository whose workflows may deploy. */
  repository: string;
  /** An existing GitHub OIDC provider's ARN (one per account); created here when not given. */
  oidcProviderArn?: string;
}

/**
 * What the sandbox workflow (.github/workflows/sandbox.yml) assumes, as code: GitHub's OIDC provider
 * and a deploy role that only this repository's main branch can assume (no long-lived keys). The role
 * can assume the CDK bootstrap roles (which deploy) and describe stacks (the teardown check), nothing
 * else. `npx cdk deploy HostedModelApi-ci -c githubRepository=owner/name` once per account.
 */
export class CiBootstrapStack extends Stack {
  constructor(scope: Construct, id: string, props: CiBootstrapStackProps) {
    super(scope, id, props);
    if (!/^[\w.-]+\/[\w.-]+$/.test(props.repository))
      throw new Error(`githubRepository must be owner/name, got ${JSON.stringify(props.repository)}`);
    const issuer = 'token.actions.githubusercontent.com';
    const provider = props.oidcProviderArn
      ? OpenIdConnectProvider.fromOpenIdConnectProviderArn(this, 'GitHub', props.oidcProviderArn)
      : new OpenIdConnectProvider(this, 'GitHub', {
          url: `https://${issuer}`,
          clientIds: ['sts.amazonaws.com'],
        });
    const role = new Role(this, 'SandboxDeploy', {
      description: `Deploys and tears down the sandbox from ${props.repository}'s main branch`,
      maxSessionDuration: Duration.hours(1),
      assumedBy: new WebIdentityPrincipal(provider.openIdConnectProviderArn, {
        StringEquals: {
          [`${issuer}:aud`]: 'sts.amazonaws.com',
          [`${issuer}:sub`]: `repo:${props.repository}:ref:refs/heads/main`,
        },
      }),
    });
    role.addToPolicy(
      new PolicyStatement({
        actions: ['sts:AssumeRole'],
        resources: [`arn:${this.partition}:iam::${this.account}:role/cdk-*`],
      }),
    );
    role.addToPolicy(
      new PolicyStatement({
        actions: ['cloudformation:DescribeStacks'],
        resources: [
          `arn:${this.partition}:cloudformation:${this.region}:${this.account}:stack/HostedModelApi-sandbox/*`,
        ],
      }),
    );
    new CfnOutput(this, 'SandboxRoleArn', {
      value: role.roleArn,
      description: 'Set as the repository secret AWS_SANDBOX_ROLE_ARN',
    });
  }
}
