import {
  CfnOutput,
  DefaultStackSynthesizer,
  Duration,
  Stack,
  type StackProps,
  Validations,
} from 'aws-cdk-lib';
import { OidcProviderNative, PolicyStatement, Role, WebIdentityPrincipal } from 'aws-cdk-lib/aws-iam';
import type { Construct } from 'constructs';
import { AUDIT_TABLE, TABLES } from '../tables.js';
import { fixedTableName } from './service-tables.js';

/** The sandbox stack's name (bin/app.ts: HostedModelApi-<stage>). */
const SANDBOX_STACK_NAME = 'HostedModelApi-sandbox';

/**
 * The DynamoDB actions the contract suite's setup performs with the job's credentials
 * (test/infra/ci-role-actions.test.ts derives them from the suite and checks this list).
 */
export const SANDBOX_SUITE_DYNAMODB_ACTIONS = [
  // A transaction needs the action of each of its items (Put, Update, Delete, ConditionCheck), never
  // one of its own ("Using IAM with DynamoDB transactions"): a key's creation is a Put of the key and an
  // Update of its account's count of active keys.
  'dynamodb:GetItem',
  'dynamodb:PutItem',
  'dynamodb:Query',
  'dynamodb:UpdateItem',
] as const;

export interface CiBootstrapStackProps extends StackProps {
  /** `owner/name` of the GitHub repository whose workflows may deploy. */
  repository: string;
  /** An existing GitHub OIDC provider's ARN (one per account); created here when not given. */
  oidcProviderArn?: string;
}

/**
 * What the sandbox workflow (.github/workflows/sandbox.yml) assumes, as code: GitHub's OIDC provider
 * and a deploy role that only this repository's main branch can assume (no long-lived keys). The role
 * can assume the CDK bootstrap roles a deploy uses (named exactly), describe the sandbox stack (the
 * teardown check) and make the contract suite's DynamoDB calls on the sandbox's tables, nothing else. `npx cdk deploy HostedModelApi-ci -c githubRepository=owner/name` once per account.
 */
export class CiBootstrapStack extends Stack {
  constructor(scope: Construct, id: string, props: CiBootstrapStackProps) {
    super(scope, id, props);
    if (!/^[\w.-]+\/[\w.-]+$/.test(props.repository))
      throw new Error(`githubRepository must be owner/name, got ${JSON.stringify(props.repository)}`);
    const issuer = 'token.actions.githubusercontent.com';
    // A native AWS::IAM::OIDCProvider, not CDK's OpenIdConnectProvider (a custom resource whose Lambda
    // may call iam:*OpenIDConnectProvider on any provider). No thumbprint: IAM then retrieves the top
    // intermediate CA's thumbprint of the provider's certificate itself (IAM API reference,
    // CreateOpenIDConnectProvider), and verifies GitHub's through its own library of trusted CAs.
    const provider = props.oidcProviderArn
      ? OidcProviderNative.fromOidcProviderArn(this, 'GitHub', props.oidcProviderArn)
      : new OidcProviderNative(this, 'GitHub', {
          url: `https://${issuer}`,
          clientIds: ['sts.amazonaws.com'],
        });
    const role = new Role(this, 'SandboxDeploy', {
      description: `Deploys and tears down the sandbox from ${props.repository}'s main branch`,
      maxSessionDuration: Duration.hours(1),
      assumedBy: new WebIdentityPrincipal(provider.oidcProviderArn, {
        StringEquals: {
          [`${issuer}:aud`]: 'sts.amazonaws.com',
          [`${issuer}:sub`]: `repo:${props.repository}:ref:refs/heads/main`,
        },
      }),
    });
    // The CDK bootstrap roles a deploy and a destroy of the sandbox use, named exactly: the deploy role
    // (it passes CloudFormation's execution role) and the file-publishing role (the functions' bundles).
    // No lookup or image role: the stack needs no lookups and ships no container image.
    const qualifier =
      (this.node.tryGetContext('@aws-cdk/core:bootstrapQualifier') as string | undefined) ??
      DefaultStackSynthesizer.DEFAULT_QUALIFIER;
    role.addToPolicy(
      new PolicyStatement({
        actions: ['sts:AssumeRole'],
        resources: ['deploy-role', 'file-publishing-role'].map(
          (kind) =>
            `arn:${this.partition}:iam::${this.account}:role/cdk-${qualifier}-${kind}-${this.account}-${this.region}`,
        ),
      }),
    );
    // What the contract suite does with the job's credentials (accounts and keys it creates, reads and
    // changes), on the sandbox's tables and their indexes only.
    const table = (name: string) =>
      `arn:${this.partition}:dynamodb:${this.region}:${this.account}:table/${name}`;
    const sandboxTables = Object.values(TABLES).flatMap((def) => {
      const name = fixedTableName(SANDBOX_STACK_NAME, def);
      return [table(name), ...def.indexes.map((index) => table(`${name}/index/${index.name}`))];
    });
    role.addToPolicy(
      new PolicyStatement({ actions: [...SANDBOX_SUITE_DYNAMODB_ACTIONS], resources: sandboxTables }),
    );
    // The suite's own changes (accounts credited, keys made and revoked through the operator's code)
    // are written with their audit entries: a Put on the sandbox's audit log, in the same transaction.
    role.addToPolicy(
      new PolicyStatement({
        actions: ['dynamodb:PutItem'],
        resources: [table(fixedTableName(SANDBOX_STACK_NAME, AUDIT_TABLE))],
      }),
    );
    role.addToPolicy(
      new PolicyStatement({
        actions: ['cloudformation:DescribeStacks'],
        resources: [
          `arn:${this.partition}:cloudformation:${this.region}:${this.account}:stack/${SANDBOX_STACK_NAME}/*`,
        ],
      }),
    );
    // A stack's ARN ends in a unique id CloudFormation assigns at creation
    // (arn:aws:cloudformation:<region>:<account>:stack/<name>/<id>), unknown here: `stack/<name>/*` is
    // the narrowest resource DescribeStacks can name, one stack by name. Acknowledged for exactly that
    // resource, or `cdk deploy HostedModelApi-ci` stops at cdk-nag's validation.
    Validations.of(this).acknowledge({
      id: 'AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:cloudformation:<AWS::Region>:<AWS::AccountId>:stack/HostedModelApi-sandbox/*]',
      reason:
        "DescribeStacks on the sandbox stack by name: its ARN's last part is a unique id CloudFormation assigns, so the name with a wildcard id is the narrowest resource that names it.",
    });
    new CfnOutput(this, 'SandboxRoleArn', {
      value: role.roleArn,
      description: 'Set as the repository secret AWS_SANDBOX_ROLE_ARN',
    });
  }
}
