import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { NO_DASHBOARD_TOP_UP_URL } from '../../functions/completions/config.js';
import { ApiStack, type ApiStackProps } from '../../lib/infra/api-stack.js';
import { checkAuthDomainPrefix } from '../../lib/infra/dashboard.js';
import { FUNCTION_SETTINGS } from '../../lib/infra/function-settings.js';
import { PROD_DOMAIN, PROD_PROPS, type Resource, resources, synthStages } from './synth-offline.js';

/**
 * The dashboard as the stack deploys it (lib/infra/dashboard.ts): only on a stack with a custom domain
 * (prod's test stage has one, the sandbox's none), its Cognito user pool, domain and app client, the
 * client's secret, its sessions table, its function's grants, its behaviours and its outputs.
 */
const stackOf = synthStages();

const ORIGIN = `https://${PROD_DOMAIN.domainName}`;

/** A stack without bundling, for one property. */
const quick = (props: ApiStackProps, context: Record<string, string> = {}) =>
  Template.fromStack(
    new ApiStack(new App({ context: { 'aws:cdk:bundling-stacks': [], ...context } }), 'Quick', props),
  );

const ofType = (all: Record<string, Resource>, type: string) =>
  Object.entries(all).filter(([, r]) => r.Type === type);
const one = (all: Record<string, Resource>, type: string, prefix = ''): [string, Resource] => {
  const found = ofType(all, type).filter(([id]) => id.startsWith(prefix));
  expect(found, `${type} ${prefix}*`).toHaveLength(1);
  return found[0] as [string, Resource];
};
const dashboardFunction = (all: Record<string, Resource>) =>
  one(all, 'AWS::Lambda::Function', 'DashboardFunction');
const envOf = (fn: Resource) =>
  (fn.Properties as { Environment: { Variables: Record<string, unknown> } }).Environment.Variables;
const behaviours = (all: Record<string, Resource>) =>
  (
    one(all, 'AWS::CloudFront::Distribution')[1].Properties as {
      DistributionConfig: { CacheBehaviors: { PathPattern: string; TargetOriginId: string }[] };
    }
  ).DistributionConfig.CacheBehaviors;

describe('the dashboard without a custom domain (the sandbox test stage)', () => {
  it('is not deployed: no pool, no function, no behaviour, no output; the 402 names no page (dashboard-origin.test.ts)', () => {
    const all = resources(stackOf('sandbox').template);
    expect(ofType(all, 'AWS::Cognito::UserPool')).toEqual([]);
    expect(
      Object.keys(all).filter((id) => id.startsWith('Dashboard') && !id.startsWith('Dashboard9')),
    ).toEqual([]);
    expect(behaviours(all).map((b) => b.PathPattern)).not.toContain('/dashboard/*');
    expect(stackOf('sandbox').template.findOutputs('DashboardUrl')).toEqual({});
    const completions = one(all, 'AWS::Lambda::Function', 'CompletionsFunction')[1];
    expect(envOf(completions).TOP_UP_URL).toBe(NO_DASHBOARD_TOP_UP_URL);
  });
});

describe('the dashboard with a custom domain (the prod test stage)', () => {
  const all = () => resources(stackOf('prod').template);

  it('has a user pool: email sign-in, self sign-up with a verified email, a stated password policy, retained', () => {
    const [, pool] = one(all(), 'AWS::Cognito::UserPool');
    expect(pool.Properties).toMatchObject({
      UsernameAttributes: ['email'],
      AutoVerifiedAttributes: ['email'],
      AdminCreateUserConfig: { AllowAdminCreateUserOnly: false },
      Policies: {
        PasswordPolicy: {
          MinimumLength: 12,
          RequireLowercase: true,
          RequireUppercase: true,
          RequireNumbers: true,
          RequireSymbols: true,
        },
      },
      MfaConfiguration: 'OPTIONAL',
      EnabledMfas: ['SOFTWARE_TOKEN_MFA'],
      AccountRecoverySetting: { RecoveryMechanisms: [{ Name: 'verified_email', Priority: 1 }] },
      UserPoolTier: 'ESSENTIALS',
      DeletionProtection: 'ACTIVE',
    });
    expect((pool as { DeletionPolicy?: string }).DeletionPolicy).toBe('Retain');
  });

  it('has a Cognito prefix domain unique per stage and account, with managed login', () => {
    const [, domain] = one(all(), 'AWS::Cognito::UserPoolDomain');
    expect(domain.Properties?.Domain).toEqual({
      'Fn::Join': ['', ['hosted-model-api-prod-', { Ref: 'AWS::AccountId' }]],
    });
    expect(domain.Properties?.ManagedLoginVersion).toBe(2);
    one(all(), 'AWS::Cognito::ManagedLoginBranding');
  });

  it('takes the prefix from -c authDomainPrefix, and refuses one Cognito would', () => {
    const template = quick(PROD_PROPS, { authDomainPrefix: 'acme-api-login' });
    template.hasResourceProperties('AWS::Cognito::UserPoolDomain', { Domain: 'acme-api-login' });
    expect(() => quick(PROD_PROPS, { authDomainPrefix: 'my-aws-login' })).toThrow(/authDomainPrefix/);
    expect(checkAuthDomainPrefix('svc-login-1')).toBe('svc-login-1');
    for (const bad of ['Upper', '-lead', 'trail-', 'cognito-x', 'a'.repeat(64), 'dots.no'])
      expect(() => checkAuthDomainPrefix(bad), bad).toThrow();
  });

  it('has a confidential app client: the code grant only, openid and email, its callback and sign-out URLs', () => {
    const [, client] = one(all(), 'AWS::Cognito::UserPoolClient');
    expect(client.Properties).toMatchObject({
      GenerateSecret: true,
      AllowedOAuthFlowsUserPoolClient: true,
      AllowedOAuthFlows: ['code'],
      AllowedOAuthScopes: ['openid', 'email'],
      CallbackURLs: [`${ORIGIN}/dashboard/callback`],
      LogoutURLs: [`${ORIGIN}/dashboard/`],
      SupportedIdentityProviders: ['COGNITO'],
      PreventUserExistenceErrors: 'ENABLED',
    });
  });

  it("keeps the client's secret in Secrets Manager, read from the client at deploy time", () => {
    const [id, secret] = one(all(), 'AWS::SecretsManager::Secret', 'DashboardOidcClientSecret');
    expect(JSON.stringify(secret.Properties?.SecretString)).toContain('UserPoolClient.ClientSecret');
    const [, fn] = dashboardFunction(all());
    expect(envOf(fn).OIDC_CLIENT_SECRET_ARN).toEqual({ Ref: id });
    expect(JSON.stringify(envOf(fn))).not.toContain('UserPoolClient.ClientSecret');
  });

  it('has its sessions table: keyed by id, TTL on expiresAt, on demand, retained as the others', () => {
    const [, table] = one(all(), 'AWS::DynamoDB::GlobalTable', 'DashboardTable');
    expect(table.Properties).toMatchObject({
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
      TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
      BillingMode: 'PAY_PER_REQUEST',
      SSESpecification: { SSEEnabled: true },
      Replicas: [expect.objectContaining({ DeletionProtectionEnabled: true })],
    });
    expect((table as { DeletionPolicy?: string }).DeletionPolicy).toBe('Retain');
  });

  it('runs the dashboard function with its settings and the environment it reads', () => {
    const [, fn] = dashboardFunction(all());
    expect(fn.Properties).toMatchObject({
      Timeout: FUNCTION_SETTINGS.dashboard.timeoutSeconds,
      MemorySize: FUNCTION_SETTINGS.dashboard.memoryMb,
    });
    const env = envOf(fn);
    expect(env.DASHBOARD_ORIGIN).toBe(ORIGIN);
    expect(env.DASHBOARD_TABLE).toEqual({
      Ref: one(all(), 'AWS::DynamoDB::GlobalTable', 'DashboardTable')[0],
    });
    expect(JSON.stringify(env.OIDC_ISSUER)).toContain('https://cognito-idp.');
    expect(env.OIDC_CLIENT_ID).toEqual({ Ref: one(all(), 'AWS::Cognito::UserPoolClient')[0] });
    for (const name of [
      'STRIPE_SECRET_ARN',
      'ORIGIN_VERIFY_SECRET_ARN',
      'KEYS_TABLE',
      'ACCOUNTS_TABLE',
      'LEDGER_TABLE',
    ])
      expect(env[name], name).toBeDefined();
  });

  it('grants its role exactly what its code does (DynamoDB; its secrets: secret-grants.test.ts)', () => {
    const everything = all();
    const [, fn] = dashboardFunction(everything);
    const role = (fn.Properties as { Role: { 'Fn::GetAtt': [string, string] } }).Role['Fn::GetAtt'][0];
    const tableOf = (resource: unknown): string => {
      const text = JSON.stringify(resource);
      const id = Object.entries(everything).find(
        ([logicalId, r]) => r.Type === 'AWS::DynamoDB::GlobalTable' && text.includes(`"${logicalId}"`),
      )?.[0];
      const table = (id ?? '?').replace(/^Tables/, '').replace(/[0-9A-F]{8}$/, '');
      const index = /\/index\/(\w+)/.exec(text)?.[1];
      return index ? `${table}/index/${index}` : table;
    };
    const grants = Object.values(everything)
      .filter(
        (r) =>
          r.Type === 'AWS::IAM::Policy' &&
          ((r.Properties?.Roles as { Ref?: string }[] | undefined) ?? []).some((x) => x.Ref === role),
      )
      .flatMap(
        (r) =>
          (r.Properties as { PolicyDocument: { Statement: { Action: unknown; Resource: unknown }[] } })
            .PolicyDocument.Statement,
      )
      .flatMap((s) =>
        [s.Action]
          .flat()
          .map(String)
          .filter((a) => a.startsWith('dynamodb:'))
          .flatMap((a) => [s.Resource].flat().map((r) => `${a} ${tableOf(r)}`)),
      )
      .sort();
    // Each grant once (the balance watch's construct grants the levels' copy on the accounts table,
    // which the dashboard's own statements may already hold): what it may do, as a set.
    expect([...new Set(grants)]).toEqual([
      'dynamodb:BatchGetItem accounts',
      'dynamodb:DeleteItem DashboardTable',
      // Members and invitations (a member removed, an invitation revoked or accepted).
      'dynamodb:DeleteItem team',
      'dynamodb:GetItem DashboardTable',
      'dynamodb:GetItem accounts',
      'dynamodb:GetItem keys',
      'dynamodb:GetItem team',
      'dynamodb:PutItem DashboardTable',
      'dynamodb:PutItem accounts',
      // Each change's audit entry.
      'dynamodb:PutItem audit',
      'dynamodb:PutItem keys',
      'dynamodb:PutItem team',
      'dynamodb:Query audit',
      'dynamodb:Query keys/index/byAccount',
      'dynamodb:Query keys/index/byKeyId',
      'dynamodb:Query ledger',
      'dynamodb:Query team',
      'dynamodb:Query team/index/byMember',
      // The balance watch's settings on its watch item (lib/infra/balance-watch.ts).
      'dynamodb:UpdateItem DashboardTable',
      // The account's count of active keys (a key created or revoked).
      'dynamodb:UpdateItem accounts',
      'dynamodb:UpdateItem keys',
      // A member's role, the owners count.
      'dynamodb:UpdateItem team',
    ]);
  });

  it('is reached at /dashboard and /dashboard/* without the key check (its host redirect only), through a BUFFERED URL with the origin header', () => {
    const everything = all();
    const [urlId, url] = one(everything, 'AWS::Lambda::Url', 'DashboardFunctionFunctionUrl');
    expect(url.Properties).toMatchObject({ AuthType: 'NONE', InvokeMode: 'BUFFERED' });
    const config = (
      one(everything, 'AWS::CloudFront::Distribution')[1].Properties as {
        DistributionConfig: {
          CacheBehaviors: { PathPattern: string; TargetOriginId: string; FunctionAssociations?: unknown }[];
          Origins: { Id: string; DomainName: unknown; OriginCustomHeaders?: { HeaderName: string }[] }[];
        };
      }
    ).DistributionConfig;
    const site = config.CacheBehaviors.filter((b) => b.PathPattern.startsWith('/dashboard'));
    expect(site.map((b) => b.PathPattern)).toEqual(['/dashboard', '/dashboard/*']);
    const origin = config.Origins.find((o) => JSON.stringify(o.DomainName).includes(urlId));
    expect(origin?.OriginCustomHeaders?.map((h) => h.HeaderName)).toEqual(['x-origin-verify']);
    for (const behaviour of site) {
      expect(behaviour.TargetOriginId).toBe(origin?.Id);
      // The redirect of another host name to the custom domain (dashboard-origin.test.ts), not the key check.
      expect(JSON.stringify(behaviour.FunctionAssociations)).toMatch(/"DashboardHost[0-9A-F]{8}"/);
    }
  });

  it("points the 402's topUpUrl at its billing page, unless -c topUpUrl says otherwise", () => {
    const completions = one(all(), 'AWS::Lambda::Function', 'CompletionsFunction')[1];
    expect(envOf(completions).TOP_UP_URL).toBe(`${ORIGIN}/dashboard/billing`);
    const given = quick({ ...PROD_PROPS, topUpUrl: 'https://pay.acme-billing.com/top-up' });
    given.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ TOP_UP_URL: 'https://pay.acme-billing.com/top-up' }) },
    });
  });

  it('alarms on its errors and on its table, and states its address, pool and sign-in domain', () => {
    const { template } = stackOf('prod');
    const errors = one(all(), 'AWS::CloudWatch::Alarm', 'DashboardErrors')[1];
    expect(errors.Properties).toMatchObject({ MetricName: 'Errors', Namespace: 'AWS/Lambda', Threshold: 1 });
    one(all(), 'AWS::CloudWatch::Alarm', 'DashboardTableSystemErrors');
    one(all(), 'AWS::CloudWatch::Alarm', 'DashboardTableThrottles');
    expect(template.findOutputs('DashboardUrl').DashboardUrl?.Value).toBe(`${ORIGIN}/dashboard/`);
    expect(Object.keys(template.findOutputs('DashboardUserPoolId'))).toEqual(['DashboardUserPoolId']);
    expect(Object.keys(template.findOutputs('DashboardSignInDomain'))).toEqual(['DashboardSignInDomain']);
    // The operator CLI's DASHBOARD_TABLE: where the customers' e-mail addresses are (account list, account find).
    expect(template.findOutputs('DashboardTableName').DashboardTableName?.Value).toEqual({
      Ref: expect.stringMatching(/^DashboardTable/),
    });
  });

  it('keeps cdk-nag clean', () => {
    expect(stackOf('prod').nag?.violations).toEqual([]);
  });
});
