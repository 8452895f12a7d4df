import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { ApiStack } from '../../lib/infra/api-stack.js';
import { REPUTATION_ALARMS } from '../../lib/infra/email.js';
import { PROD_PROPS, type Resource, resources, type Synthesized, synthOffline } from './synth-offline.js';

/**
 * The stack's e-mail (lib/infra/email.ts) and the dashboard's sign-up protection, as prod synthesizes
 * them with a custom domain: the SES identity with Easy DKIM and its default configuration set
 * (bounces and complaints suppressed, reputation metrics), the balance watch's grant (exactly the
 * identity and the configuration set, plus each sandbox recipient's identity when given, from the
 * sender only), the user pool's e-mail through SES with Cognito's sending authorization, the
 * reputation alarms at AWS's review thresholds, and the pre-sign-up trigger with its caps and its
 * one grant. cdk-nag stays green.
 */
let prod: Synthesized;
beforeAll(() => {
  prod = synthOffline(PROD_PROPS);
}, 240_000);

const quick = (context: Record<string, string>) =>
  resources(
    Template.fromStack(
      new ApiStack(new App({ context: { 'aws:cdk:bundling-stacks': [], ...context } }), 'Quick', PROD_PROPS),
    ),
  );

/** An expression as text: Fn::Join joined, Ref as `${Ref}`, Fn::GetAtt as `${Id.Attr}`. */
function flat(value: unknown): string {
  if (typeof value === 'string') return value;
  const e = value as Record<string, unknown>;
  if (typeof e.Ref === 'string') return `\${${e.Ref}}`;
  const getAtt = e['Fn::GetAtt'] as [string, string] | undefined;
  if (getAtt) return `\${${getAtt[0]}.${getAtt[1]}}`;
  const join = e['Fn::Join'] as [string, unknown[]] | undefined;
  if (join) return join[1].map(flat).join(join[0]);
  return JSON.stringify(value);
}
// biome-ignore lint/suspicious/noTemplateCurlyInString: CloudFormation's own ${AWS::...} placeholders, as the template has them
const ARN = 'arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:';
const ofType = (all: Record<string, Resource>, type: string) =>
  Object.entries(all).filter(([, r]) => r.Type === type);
const one = (all: Record<string, Resource>, type: string, prefix = ''): [string, Resource] => {
  const found = ofType(all, type).filter(([id]) => id.startsWith(prefix));
  expect(found, `${type} ${prefix}*`).toHaveLength(1);
  return found[0] as [string, Resource];
};
type Statement = { Action: string | string[]; Resource: unknown; Condition?: unknown };
const statementsOfRole = (all: Record<string, Resource>, functionPrefix: string): Statement[] => {
  const [, fn] = one(all, 'AWS::Lambda::Function', functionPrefix);
  const role = ((fn.Properties as Record<string, unknown>).Role as { 'Fn::GetAtt': [string] })[
    'Fn::GetAtt'
  ][0];
  return ofType(all, 'AWS::IAM::Policy')
    .filter(([, p]) =>
      ((p.Properties as Record<string, unknown>).Roles as { Ref: string }[]).some((r) => r.Ref === role),
    )
    .flatMap(
      ([, p]) =>
        ((p.Properties as Record<string, unknown>).PolicyDocument as { Statement: Statement[] }).Statement,
    );
};
const sesStatements = (all: Record<string, Resource>) =>
  statementsOfRole(all, 'BalanceWatchFunction').filter((s) =>
    [s.Action].flat().some((a) => a.startsWith('ses:')),
  );

describe('the SES identity and its configuration set', () => {
  it('verifies the sender domain with Easy DKIM (2048-bit), its default configuration set suppressing bounces and complaints', () => {
    const all = resources(prod.template);
    const [setId, set] = one(all, 'AWS::SES::ConfigurationSet');
    expect(set.Properties).toMatchObject({
      Name: 'Test-prod-email',
      SuppressionOptions: { SuppressedReasons: ['BOUNCE', 'COMPLAINT'] },
      ReputationOptions: { ReputationMetricsEnabled: true },
    });
    const [, identity] = one(all, 'AWS::SES::EmailIdentity');
    expect(identity.Properties).toMatchObject({
      EmailIdentity: 'api.example.com',
      DkimAttributes: { SigningEnabled: true },
      DkimSigningAttributes: { NextSigningKeyLength: 'RSA_2048_BIT' },
      ConfigurationSetAttributes: { ConfigurationSetName: { Ref: setId } },
    });
    expect(prod.template.findOutputs('EmailDkimRecords')).not.toEqual({});
  });

  it('takes another identity (an address) and refuses a sender it does not cover', () => {
    const all = quick({ emailIdentity: 'alerts@mail.example.org', alertSender: 'alerts@mail.example.org' });
    expect(one(all, 'AWS::SES::EmailIdentity')[1].Properties?.EmailIdentity).toBe('alerts@mail.example.org');
    expect(() => quick({ emailIdentity: 'example.org' })).toThrow(/not covered by the SES identity/);
  });
});

describe("the balance watch's grant: exactly what SES v2 checks", () => {
  it('ses:SendEmail on the identity and the configuration set, from the sender only', () => {
    const statements = sesStatements(resources(prod.template));
    expect(statements).toHaveLength(1);
    const [statement] = statements as [Statement];
    expect(statement.Action).toBe('ses:SendEmail');
    expect([statement.Resource].flat().map(flat)).toEqual([
      `${ARN}identity/api.example.com`,
      `${ARN}configuration-set/Test-prod-email`,
    ]);
    expect(statement.Condition).toEqual({ StringEquals: { 'ses:FromAddress': 'no-reply@api.example.com' } });
  });

  it("in the SES sandbox, each recipient's identity too (-c sesSandboxRecipients=...)", () => {
    const [statement] = sesStatements(quick({ sesSandboxRecipients: 'ops@example.org, example.net' })) as [
      Statement,
    ];
    expect([statement.Resource].flat().map(flat)).toEqual([
      `${ARN}identity/api.example.com`,
      `${ARN}configuration-set/Quick-email`,
      `${ARN}identity/ops@example.org`,
      `${ARN}identity/example.net`,
    ]);
  });
});

describe("the user pool's e-mail through SES", () => {
  it('sends as DEVELOPER from the identity, with the configuration set', () => {
    const [, pool] = one(resources(prod.template), 'AWS::Cognito::UserPool');
    const config = pool.Properties?.EmailConfiguration as Record<string, unknown>;
    expect(config.EmailSendingAccount).toBe('DEVELOPER');
    expect(config.From).toBe('no-reply@api.example.com');
    expect(config.ConfigurationSet).toBe('Test-prod-email');
    expect(flat(config.SourceArn)).toBe(`${ARN}identity/api.example.com`);
  });

  it("puts Cognito's sending authorization policy on the identity: email.cognito-idp.amazonaws.com, this pool only", () => {
    const all = resources(prod.template);
    const [poolId] = one(all, 'AWS::Cognito::UserPool');
    const [, policy] = one(all, 'Custom::AWS', 'EmailCognitoSendingAuthorization');
    const create = flat(policy.Properties?.Create);
    expect(create).toContain('"action":"putEmailIdentityPolicy"');
    expect(create).toContain('"EmailIdentity":"api.example.com"');
    expect(create).toContain('email.cognito-idp.amazonaws.com');
    expect(create).toContain(`\${${poolId}.Arn}`);
    expect(create).toContain('aws:SourceAccount');
    expect(flat(policy.Properties?.Delete)).toContain('deleteEmailIdentityPolicy');
  });
});

describe('reputation alarms', () => {
  it.each([
    ['Reputation.BounceRate', REPUTATION_ALARMS.bounceRate, 0.05],
    ['Reputation.ComplaintRate', REPUTATION_ALARMS.complaintRate, 0.001],
  ])('%s at or above %s alarms the operators', (metric, threshold, expected) => {
    expect(threshold).toBe(expected);
    const alarms = ofType(resources(prod.template), 'AWS::CloudWatch::Alarm').filter(
      ([, a]) => a.Properties?.MetricName === metric,
    );
    expect(alarms).toHaveLength(1);
    const [[, alarm]] = alarms as [[string, Resource]];
    expect(alarm.Properties).toMatchObject({
      Namespace: 'AWS/SES',
      Threshold: expected,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      TreatMissingData: 'notBreaching',
    });
    expect(((alarm.Properties as Record<string, unknown>).AlarmActions as unknown[]).length).toBe(1);
  });
});

describe('sign-up protection', () => {
  it('the pool runs the pre-sign-up guard, which may only update the dashboard table, with its caps', () => {
    const all = resources(prod.template);
    const [, pool] = one(all, 'AWS::Cognito::UserPool');
    const [guardId, guard] = one(all, 'AWS::Lambda::Function', 'SignUpGuardFunction');
    expect(
      flat(((pool.Properties as Record<string, unknown>).LambdaConfig as { PreSignUp: unknown }).PreSignUp),
    ).toBe(`\${${guardId}.Arn}`);
    const env = (guard.Properties as { Environment: { Variables: Record<string, unknown> } }).Environment
      .Variables;
    expect(env).toMatchObject({
      SIGN_UPS_PER_HOUR: '50',
      SIGN_UPS_PER_DAY: '300',
      SIGN_UPS_PER_DOMAIN_PER_DAY: '50',
    });
    const [tableId] = one(all, 'AWS::DynamoDB::GlobalTable', 'DashboardTable');
    const dynamo = statementsOfRole(all, 'SignUpGuardFunction').filter((s) =>
      [s.Action].flat().some((a) => a.startsWith('dynamodb:')),
    );
    expect(dynamo.map((s) => [s.Action, flat(s.Resource)])).toEqual([
      ['dynamodb:UpdateItem', `\${${tableId}.Arn}`],
    ]);
  });

  it('takes its caps from context, and refuses one that is not a positive integer', () => {
    const [, guard] = one(
      quick({ signUpsPerHour: '5', signUpsPerDay: '20', signUpsPerDomainPerDay: '3' }),
      'AWS::Lambda::Function',
      'SignUpGuardFunction',
    );
    expect(
      (guard.Properties as { Environment: { Variables: Record<string, unknown> } }).Environment.Variables,
    ).toMatchObject({ SIGN_UPS_PER_HOUR: '5', SIGN_UPS_PER_DAY: '20', SIGN_UPS_PER_DOMAIN_PER_DAY: '3' });
    expect(() => quick({ signUpsPerHour: '0' })).toThrow(/signUpsPerHour must be a positive integer/);
  });
});

describe('cdk-nag', () => {
  it('reports no unacknowledged finding for prod with the e-mail and the trigger', () => {
    expect(prod.nag?.conclusion).toBe('success');
    expect(prod.nag?.violations).toEqual([]);
  });
});
