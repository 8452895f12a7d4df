import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { modelCatalog } from '../../functions/core/catalog.js';
import { parseTierConfig, singleUpstreamConfig } from '../../functions/core/tiers.js';
import { ApiStack, type ApiStackProps } from '../../lib/infra/api-stack.js';
import { edgeFunctionCode } from '../../lib/infra/edge-function.js';
import { EDGE_ORIGINS } from '../../lib/infra/edge-routes.js';
import { FUNCTION_SETTINGS } from '../../lib/infra/function-settings.js';
import {
  BILLED_SEARCH,
  GENERATION_METRIC_DIMENSIONS,
  GENERATION_METRICS,
} from '../../lib/infra/generation-metrics.js';
import { ACKNOWLEDGED } from '../../lib/infra/nag-suppressions.js';
import { PROD_DOMAIN } from './synth-offline.js';

/** The stack, proven offline: template assertions for every property, and cdk-nag's AwsSolutions pack. */
/** The repository's example tier configuration, as the README's deploy command passes it. */
const TIERS = readFileSync(new URL('../../config/tiers.example.json', import.meta.url), 'utf8');

let sandboxAssemblyDir = '';
function synth(props: Omit<ApiStackProps, 'stage'> & { stage: ApiStackProps['stage'] }) {
  const app = new App();
  const stack = new ApiStack(app, `Test-${props.stage}`, props);
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  // Synthesis fails if cdk-nag reports a finding that is not acknowledged.
  const assembly = app.synth();
  const report = JSON.parse(readFileSync(join(assembly.directory, 'validation-report.json'), 'utf8')) as {
    pluginReports: {
      pluginName: string;
      conclusion: string;
      violations: unknown[];
      suppressedViolations: { ruleName: string }[];
    }[];
  };
  if (props.stage === 'sandbox') sandboxAssemblyDir = assembly.directory;
  return { template: Template.fromStack(stack), report };
}

let sandbox: ReturnType<typeof synth>;
let prod: ReturnType<typeof synth>;
beforeAll(() => {
  sandbox = synth({ stage: 'sandbox' });
  prod = synth({
    stage: 'prod',
    tiersConfig: TIERS,
    reservedConcurrency: 50,
    alarmEmail: 'ops@example.com',
    tableMaxReadUnits: 1_000,
    tableMaxWriteUnits: 500,
    monthlyBudgetUsd: 200,
    // A custom domain: prod has the dashboard (lib/infra/dashboard.ts), the sandbox (none) does not.
    ...PROD_DOMAIN,
  });
}, 300_000);

const lambdaFunctions = (template: Template) => template.findResources('AWS::Lambda::Function');
/** Our functions, not CDK's own helpers: the ones carrying the service's Powertools name. */
const userFunctions = (template: Template) =>
  Object.entries(lambdaFunctions(template)).filter(
    ([, r]) =>
      (r as { Properties: { Environment?: { Variables?: Record<string, string> } } }).Properties.Environment
        ?.Variables?.POWERTOOLS_SERVICE_NAME === 'hosted-model-api',
  );

describe('cdk-nag AwsSolutions', () => {
  it.each(['sandbox', 'prod'] as const)('reports zero unacknowledged findings for %s', (stage) => {
    const { report } = stage === 'sandbox' ? sandbox : prod;
    const nag = report.pluginReports.find((p) => p.pluginName === 'AwsSolutions');
    expect(nag?.conclusion).toBe('success');
    expect(nag?.violations).toEqual([]);
  });

  it('acknowledges only findings that occur, each with a reason', () => {
    // In either stage: the dashboard's user pool (COG2, COG8) is only in prod's, the one with a domain.
    const suppressed = new Set(
      [sandbox, prod].flatMap(({ report }) =>
        report.pluginReports.flatMap((p) => p.suppressedViolations.map((v) => `AwsSolutions::${v.ruleName}`)),
      ),
    );
    for (const { id, reason } of ACKNOWLEDGED) {
      expect(suppressed.has(id), id).toBe(true);
      expect(reason.length).toBeGreaterThan(40);
    }
  });
});

describe('functions', () => {
  it('run Node.js 22 on arm64 with source maps, ESM bundles and their own log groups', () => {
    const fns = userFunctions(sandbox.template);
    // completions, models, hold sweeper, logged usage, payments, payments reconciler, simulator
    expect(fns).toHaveLength(7);
    for (const [, fn] of fns) {
      const p = (fn as { Properties: Record<string, unknown> }).Properties;
      expect(p.Runtime).toBe('nodejs22.x');
      expect(p.Architectures).toEqual(['arm64']);
      const variables = (p.Environment as { Variables: Record<string, string> }).Variables;
      expect(variables.NODE_OPTIONS).toBeUndefined();
      expect(variables.MALLOC_TRIM_THRESHOLD_).toBe('131072');
      expect(p.LoggingConfig).toBeDefined();
    }
    sandbox.template.allResourcesProperties('AWS::Logs::LogGroup', { RetentionInDays: 7 });
    prod.template.allResourcesProperties('AWS::Logs::LogGroup', { RetentionInDays: 90 });
  });

  it('put completions behind a RESPONSE_STREAM URL and models behind a BUFFERED one, both authenticating themselves', () => {
    // And the payments function's (Stripe's webhook); in the sandbox the simulator's, in prod (a custom
    // domain) the dashboard's.
    sandbox.template.resourceCountIs('AWS::Lambda::Url', 4);
    prod.template.resourceCountIs('AWS::Lambda::Url', 4);
    prod.template.hasResourceProperties('AWS::Lambda::Url', {
      InvokeMode: 'RESPONSE_STREAM',
      AuthType: 'NONE',
    });
    // The models URL too is auth type NONE behind the origin secret, with no origin access control:
    // an OAC signing always would overwrite the customer's Authorization (edge-routes.ts), and
    // the local emulator follows the same table (test/integration/edge-auth.test.ts).
    prod.template.hasResourceProperties('AWS::Lambda::Url', { InvokeMode: 'BUFFERED', AuthType: 'NONE' });
    expect(EDGE_ORIGINS).toEqual({
      completions: { urlAuthType: 'NONE', originHeader: true },
      models: { urlAuthType: 'NONE', originHeader: true },
      // The webhook checks the origin header before Stripe's signature (functions/payments/handler.ts).
      payments: { urlAuthType: 'NONE', originHeader: true },
      // The dashboard checks the origin header itself (functions/dashboard/app.tsx).
      dashboard: { urlAuthType: 'NONE', originHeader: true },
    });
    prod.template.resourceCountIs('AWS::CloudFront::OriginAccessControl', 0);
    expect(
      Object.values(prod.template.findResources('AWS::Lambda::Permission')).filter(
        (p) =>
          (p as { Properties: { Principal: string } }).Properties.Principal === 'cloudfront.amazonaws.com',
      ),
    ).toEqual([]);
    prod.template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: {
        Variables: Match.objectLike({
          ORIGIN_VERIFY_SECRET_ARN: Match.anyValue(),
          KEYS_TABLE: Match.anyValue(),
        }),
      },
      MemorySize: 256,
      Timeout: 10,
    });
  });

  it('bundle their own DynamoDB calls, not the AWS SDK, and ship the tokenizer beside the bundle, loadable on first use', async () => {
    const [, completions] =
      userFunctions(sandbox.template).find(([id]) => id.startsWith('Completions')) ?? [];
    const s3Key = (completions as { Properties: { Code: { S3Key: string } } }).Properties.Code.S3Key;
    const dir = join(sandboxAssemblyDir, `asset.${s3Key.replace(/\.zip$/, '')}`);
    const bundle = readFileSync(join(dir, 'index.mjs'), 'utf8');
    // The store's calls are signed and sent by wire.ts (DynamoDB's JSON protocol), not by the SDK's client.
    expect(bundle).toContain('DynamoDB_20120810');
    expect(bundle).not.toContain('DynamoDBClient');
    expect(bundle.length).toBeLessThan(1_500_000);
    const tokenizer = (await import(join(dir, 'node_modules/gpt-tokenizer/index.mjs'))) as {
      countTokens: (text: string) => number;
    };
    expect(tokenizer.countTokens('hello world')).toBe(2);
  });

  it('cap completions concurrency when configured, as a ceiling on in-flight spend', () => {
    prod.template.hasResourceProperties('AWS::Lambda::Function', {
      ReservedConcurrentExecutions: 50,
      Timeout: 300,
      MemorySize: FUNCTION_SETTINGS.completions.memoryMb,
    });
    // The hold sweeper reserves one concurrent execution only when asked (test/infra/operations.test.ts).
    const reserved = userFunctions(sandbox.template).filter(
      ([id, f]) =>
        !id.startsWith('HoldSweeper') &&
        (f as { Properties: Record<string, unknown> }).Properties.ReservedConcurrentExecutions !== undefined,
    );
    expect(reserved).toHaveLength(0);
  });

  it('deploy the simulator only in the sandbox, as the completions upstream', () => {
    sandbox.template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: {
        Variables: Match.objectLike({
          UPSTREAM_BASE_URL: Match.anyValue(),
          UPSTREAM_SECRET_ARN: Match.anyValue(),
        }),
      },
    });
    // No simulator; the dashboard, the balance watch and the sign-up guard (a custom domain), the
    // payments reconciler.
    expect(userFunctions(prod.template)).toHaveLength(9);
    prod.template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ TIERS_CONFIG: TIERS }) },
    });
  });

  it("state each tier's context length and prices on /models, from the tier configuration", () => {
    const models = userFunctions(prod.template).find(([id]) => id.startsWith('Models'));
    if (!models) throw new Error('no models function');
    const env = (models[1] as { Properties: { Environment: { Variables: Record<string, string> } } })
      .Properties.Environment.Variables;
    expect(JSON.parse(env.MODELS_CATALOG ?? '{}')).toEqual(modelCatalog(parseTierConfig(JSON.parse(TIERS))));
    expect(JSON.parse(env.MODELS_CATALOG ?? '{}')['svc-pro']).toMatchObject({
      context_length: 1_047_576,
      pricing: { prompt: '0.00000052', completion: '0.00000208' },
    });
  });

  it('refuse a prod stage without tier routing', () => {
    expect(() => new ApiStack(new App(), 'NoTiers', { stage: 'prod' })).toThrow(/tiersConfig/);
  });

  it('refuse a prod stage without reserved concurrency or an alarm destination', () => {
    const base = { stage: 'prod' as const, tiersConfig: TIERS };
    expect(() => new ApiStack(new App(), 'NoReserved', { ...base, alarmEmail: 'ops@example.com' })).toThrow(
      /reservedConcurrency/,
    );
    expect(() => new ApiStack(new App(), 'NoAlarms', { ...base, reservedConcurrency: 50 })).toThrow(
      /alarm destination/,
    );
  });

  it("derive completions' MAX_CONCURRENCY from its reserved concurrency, and alarm at 80% of it", () => {
    const completions = userFunctions(prod.template).find(([id]) => id.startsWith('Completions'));
    if (!completions) throw new Error('no completions function');
    const props = (
      completions[1] as {
        Properties: {
          ReservedConcurrentExecutions: number;
          Environment: { Variables: Record<string, string> };
        };
      }
    ).Properties;
    expect(props.ReservedConcurrentExecutions).toBe(50);
    expect(props.Environment.Variables.MAX_CONCURRENCY).toBe('50');
    prod.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'ConcurrentExecutions',
      Threshold: 40,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
    });
  });
});

describe('tables', () => {
  it('are on-demand, encrypted, with point-in-time recovery and the GSIs of lib/tables.ts', () => {
    for (const { template } of [sandbox, prod]) {
      // And prod's fifth, the dashboard's (test/infra/dashboard.test.ts).
      // The service's four, the team's and the audit log (team-tables.test.ts), and prod's dashboard table.
      template.resourceCountIs('AWS::DynamoDB::GlobalTable', template === prod.template ? 7 : 6);
      template.allResourcesProperties('AWS::DynamoDB::GlobalTable', {
        BillingMode: 'PAY_PER_REQUEST',
        SSESpecification: { SSEEnabled: true },
        Replicas: [
          Match.objectLike({ PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true } }),
        ],
      });
      template.hasResourceProperties('AWS::DynamoDB::GlobalTable', {
        KeySchema: [{ AttributeName: 'keyHash', KeyType: 'HASH' }],
        GlobalSecondaryIndexes: [
          Match.objectLike({ IndexName: 'byAccount' }),
          Match.objectLike({ IndexName: 'byKeyId' }),
        ],
      });
      template.hasResourceProperties('AWS::DynamoDB::GlobalTable', {
        KeySchema: [
          { AttributeName: 'accountId', KeyType: 'HASH' },
          { AttributeName: 'entryId', KeyType: 'RANGE' },
        ],
      });
      template.hasResourceProperties('AWS::DynamoDB::GlobalTable', {
        KeySchema: [
          { AttributeName: 'accountId', KeyType: 'HASH' },
          { AttributeName: 'holdId', KeyType: 'RANGE' },
        ],
      });
    }
  });

  it('are retained and deletion-protected in prod, and disposable in the sandbox', () => {
    for (const [, table] of Object.entries(prod.template.findResources('AWS::DynamoDB::GlobalTable'))) {
      const t = table as {
        DeletionPolicy: string;
        Properties: { Replicas: { DeletionProtectionEnabled: boolean }[] };
      };
      expect(t.DeletionPolicy).toBe('Retain');
      expect(t.Properties.Replicas[0]?.DeletionProtectionEnabled).toBe(true);
    }
    for (const [, table] of Object.entries(sandbox.template.findResources('AWS::DynamoDB::GlobalTable'))) {
      const t = table as {
        DeletionPolicy: string;
        Properties: { Replicas: { DeletionProtectionEnabled?: boolean }[] };
      };
      expect(t.DeletionPolicy).toBe('Delete');
      expect(t.Properties.Replicas[0]?.DeletionProtectionEnabled ?? false).toBe(false);
    }
  });
});

describe('CloudFront', () => {
  it('is the one base URL: caching disabled, all viewer headers but Host, HTTPS only, access logs, HTTP/2 and 3', () => {
    prod.template.hasResourceProperties('AWS::CloudFront::Distribution', {
      DistributionConfig: Match.objectLike({
        HttpVersion: 'http2and3',
        Logging: Match.objectLike({ Bucket: Match.anyValue() }),
        DefaultCacheBehavior: Match.objectLike({
          CachePolicyId: '4135ea2d-6df8-44a3-9df3-4b5a84be39ad', // Managed-CachingDisabled
          OriginRequestPolicyId: 'b689b0a8-53d0-40ab-baf2-68738e2966ac', // Managed-AllViewerExceptHostHeader
          ViewerProtocolPolicy: 'https-only',
          AllowedMethods: Match.arrayWith(['GET', 'POST']),
        }),
        CacheBehaviors: [
          '/api/v1/chat/completions',
          '/api/v1/chat/completions/',
          '/stripe/webhook',
          '/dashboard',
          '/dashboard/*',
        ].map((PathPattern) =>
          Match.objectLike({
            PathPattern,
            CachePolicyId: '4135ea2d-6df8-44a3-9df3-4b5a84be39ad',
            ViewerProtocolPolicy: 'https-only',
          }),
        ),
      }),
    });
  });

  it('sends the secret origin header to every origin, and waits 60 s for the completions origin', () => {
    const [distribution] = Object.values(prod.template.findResources('AWS::CloudFront::Distribution'));
    const origins = (
      distribution as { Properties: { DistributionConfig: { Origins: Record<string, unknown>[] } } }
    ).Properties.DistributionConfig.Origins;
    expect(origins).toHaveLength(4);
    // Every origin: the API's two, the payments function's (Stripe's webhook) and the dashboard's.
    const withHeader = origins.filter((o) => o.OriginCustomHeaders !== undefined);
    expect(withHeader).toHaveLength(4);
    for (const origin of withHeader) {
      const headers = origin.OriginCustomHeaders as { HeaderName: string; HeaderValue: unknown }[];
      expect(headers.map((h) => h.HeaderName)).toEqual(['x-origin-verify']);
      expect(JSON.stringify(headers[0]?.HeaderValue)).toContain('resolve:secretsmanager');
    }
    expect(
      origins.some((o) => (o.CustomOriginConfig as { OriginReadTimeout?: number }).OriginReadTimeout === 60),
    ).toBe(true);
  });

  it.each(['sandbox', 'prod'] as const)(
    'caches no error response on any route, and passes the origin error through (%s)',
    (stage) => {
      const [distribution] = Object.values(
        (stage === 'prod' ? prod : sandbox).template.findResources('AWS::CloudFront::Distribution'),
      );
      const config = (
        distribution as {
          Properties: {
            DistributionConfig: {
              CustomErrorResponses?: Record<string, unknown>[];
              DefaultCacheBehavior: { CachePolicyId: string };
              CacheBehaviors: { CachePolicyId: string }[];
            };
          };
        }
      ).Properties.DistributionConfig;
      // Every status CloudFront's error caching applies to, each with a TTL of 0 and no replacement
      // page or status: the client gets the origin's own error, never a cached one.
      expect(config.CustomErrorResponses).toEqual(
        [400, 403, 404, 405, 414, 416, 500, 501, 502, 503, 504].map((code) => ({
          ErrorCode: code,
          ErrorCachingMinTTL: 0,
        })),
      );
      // No route caches a success either, so GET /models (answered per key) is never shared
      // between accounts: both behaviours use Managed-CachingDisabled, whose cache key is moot.
      for (const policy of [config.DefaultCacheBehavior, ...config.CacheBehaviors].map(
        (b) => b.CachePolicyId,
      ))
        expect(policy).toBe('4135ea2d-6df8-44a3-9df3-4b5a84be39ad');
    },
  );

  it("answers oversized bodies with its viewer-request function on every behaviour of the API's", () => {
    const { template } = prod;
    // Its own, and the dashboard's host redirect (test/infra/dashboard-origin.test.ts).
    template.resourceCountIs('AWS::CloudFront::Function', 2);
    const [viewerRequestId, viewerRequest] = Object.entries(
      template.findResources('AWS::CloudFront::Function'),
    ).find(([id]) => id.startsWith('ViewerRequest')) ?? ['', undefined];
    const fn = viewerRequest as {
      Properties: { FunctionCode: string; FunctionConfig: { Runtime: string } };
    };
    expect(fn.Properties.FunctionCode).toBe(edgeFunctionCode());
    expect(fn.Properties.FunctionConfig.Runtime).toBe('cloudfront-js-2.0');
    const config = Object.values(template.findResources('AWS::CloudFront::Distribution'))[0] as {
      Properties: { DistributionConfig: { DefaultCacheBehavior: unknown; CacheBehaviors: unknown[] } };
    };
    const behaviours = [
      config.Properties.DistributionConfig.DefaultCacheBehavior,
      ...config.Properties.DistributionConfig.CacheBehaviors,
    ];
    // The site's behaviours (Stripe's webhook, the dashboard) do not run it: the key check is the
    // API's, and neither Stripe nor a browser sends a key.
    const sitePaths = ['/stripe/webhook', '/dashboard', '/dashboard/*'];
    const site = behaviours.filter((b) =>
      sitePaths.includes(String((b as { PathPattern?: string }).PathPattern)),
    );
    expect(site).toHaveLength(3);
    for (const behaviour of site) expect(JSON.stringify(behaviour)).not.toContain(`"${viewerRequestId}"`);
    for (const behaviour of behaviours.filter((b) => !site.includes(b)))
      expect(behaviour).toMatchObject({
        FunctionAssociations: [
          { EventType: 'viewer-request', FunctionARN: { 'Fn::GetAtt': [viewerRequestId, 'FunctionARN'] } },
        ],
      });
  });

  it('sends a pinned version of the origin secret when a rotation is rolled out', () => {
    const rotated = new ApiStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'Rotated', {
      stage: 'sandbox',
      originSecretVersion: 'v-2026-11-25',
    });
    const json = JSON.stringify(Template.fromStack(rotated).findResources('AWS::CloudFront::Distribution'));
    expect(json).toContain('::v-2026-11-25}}');
    expect(JSON.stringify(sandbox.template.findResources('AWS::CloudFront::Distribution'))).not.toContain(
      'v-2026-11-25',
    );
  });

  it('sends HSTS and nosniff on every behaviour', () => {
    prod.template.hasResourceProperties('AWS::CloudFront::ResponseHeadersPolicy', {
      ResponseHeadersPolicyConfig: Match.objectLike({
        SecurityHeadersConfig: {
          StrictTransportSecurity: Match.objectLike({
            AccessControlMaxAgeSec: 63_072_000,
            IncludeSubdomains: true,
          }),
          ContentTypeOptions: { Override: true },
        },
      }),
    });
    const config = Object.values(prod.template.findResources('AWS::CloudFront::Distribution'))[0] as {
      Properties: { DistributionConfig: { DefaultCacheBehavior: unknown; CacheBehaviors: unknown[] } };
    };
    const { DefaultCacheBehavior, CacheBehaviors } = config.Properties.DistributionConfig;
    for (const behaviour of [DefaultCacheBehavior, ...CacheBehaviors])
      expect(behaviour).toMatchObject({ ResponseHeadersPolicyId: expect.anything() });
  });

  it('enforces TLS 1.2 when deployed with a custom domain and certificate', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new ApiStack(app, 'Domain', {
      stage: 'sandbox',
      domainName: 'api.example.com',
      certificateArn: 'arn:aws:acm:us-east-1:123456789012:certificate/abc',
    });
    Template.fromStack(stack).hasResourceProperties('AWS::CloudFront::Distribution', {
      DistributionConfig: Match.objectLike({
        Aliases: ['api.example.com'],
        ViewerCertificate: Match.objectLike({ MinimumProtocolVersion: 'TLSv1.2_2021' }),
      }),
    });
  });

  it('logs to a private, SSL-only bucket', () => {
    prod.template.hasResourceProperties('AWS::S3::Bucket', {
      PublicAccessBlockConfiguration: {
        BlockPublicAcls: true,
        BlockPublicPolicy: true,
        IgnorePublicAcls: true,
        RestrictPublicBuckets: true,
      },
      BucketEncryption: Match.anyValue(),
    });
    prod.template.hasResourceProperties('AWS::S3::BucketPolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
        ]),
      },
    });
  });
});

describe('WAF', () => {
  /** A stack synthesized without bundling the functions (CDK's bundling-stacks context): for its WAF only. */
  const quick = (props: Partial<ApiStackProps>, region?: string) => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new ApiStack(app, 'Waf', {
      stage: 'prod',
      tiersConfig: TIERS,
      reservedConcurrency: 5,
      alarmEmail: 'ops@example.com',
      monthlyBudgetUsd: 200,
      ...PROD_DOMAIN,
      ...(region ? { env: { account: '123456789012', region } } : {}),
      ...props,
    });
    return Template.fromStack(stack);
  };
  const webAclId = (template: Template) =>
    (
      Object.values(template.findResources('AWS::CloudFront::Distribution'))[0] as {
        Properties: { DistributionConfig: { WebACLId?: unknown } };
      }
    ).Properties.DistributionConfig.WebACLId;

  it('puts a CLOUDFRONT-scope web ACL in front of the prod distribution: IP reputation, then 429 per IP', () => {
    const acls = prod.template.findResources('AWS::WAFv2::WebACL');
    expect(Object.keys(acls)).toHaveLength(1);
    const [id, acl] = Object.entries(acls)[0] as [string, { Properties: Record<string, unknown> }];
    expect(webAclId(prod.template)).toEqual({ 'Fn::GetAtt': [id, 'Arn'] });
    const { Scope, DefaultAction, Rules, CustomResponseBodies } = acl.Properties as {
      Scope: string;
      DefaultAction: unknown;
      Rules: Record<string, unknown>[];
      CustomResponseBodies: Record<string, { Content: string; ContentType: string }>;
    };
    expect(Scope).toBe('CLOUDFRONT');
    expect(DefaultAction).toEqual({ Allow: {} });
    expect(Rules.map((r) => r.Name)).toEqual(['IpReputation', 'IpReputationBlocked', 'RatePerIp']);
    expect(Rules[0]).toMatchObject({
      Priority: 0,
      OverrideAction: { None: {} },
      Statement: {
        ManagedRuleGroupStatement: { VendorName: 'AWS', Name: 'AWSManagedRulesAmazonIpReputationList' },
      },
    });
    expect(Rules[2]).toMatchObject({
      Priority: 2,
      Statement: { RateBasedStatement: { AggregateKeyType: 'IP', EvaluationWindowSec: 300, Limit: 6_000 } },
      Action: { Block: { CustomResponse: { ResponseCode: 429, CustomResponseBodyKey: 'rateLimited' } } },
    });
    const headers = (
      Rules[2] as {
        Action: { Block: { CustomResponse: { ResponseHeaders: { Name: string; Value: string }[] } } };
      }
    ).Action.Block.CustomResponse.ResponseHeaders;
    expect(Object.fromEntries(headers.map((h) => [h.Name, h.Value]))).toMatchObject({
      'access-control-allow-origin': '*',
    });
    const body = CustomResponseBodies.rateLimited;
    expect(body?.ContentType).toBe('APPLICATION_JSON');
    expect(JSON.parse(body?.Content ?? '')).toMatchObject({
      error: {
        type: 'rate_limit_error',
        code: 'rate_limit_exceeded',
        param: null,
        message: expect.any(String),
      },
    });
  });

  it('has none in the sandbox, none in prod with waf=false, and takes a given ARN or rate limit', () => {
    sandbox.template.resourceCountIs('AWS::WAFv2::WebACL', 0);
    expect(webAclId(sandbox.template)).toBeUndefined();
    const off = quick({ waf: false });
    off.resourceCountIs('AWS::WAFv2::WebACL', 0);
    expect(webAclId(off)).toBeUndefined();
    const arn =
      'arn:aws:wafv2:us-east-1:123456789012:global/webacl/Edge/473e64fd-f30b-4765-81a0-62ad96dd167a';
    const given = quick({ webAclArn: arn }, 'eu-west-1');
    given.resourceCountIs('AWS::WAFv2::WebACL', 0);
    expect(webAclId(given)).toBe(arn);
    quick({ wafRateLimit: 1_200 }).hasResourceProperties('AWS::WAFv2::WebACL', {
      Rules: Match.arrayWith([
        Match.objectLike({ Statement: { RateBasedStatement: Match.objectLike({ Limit: 1_200 }) } }),
      ]),
    });
  });

  it('creates the web ACL only where AWS allows a CLOUDFRONT-scope one: us-east-1', () => {
    quick({}, 'us-east-1').resourceCountIs('AWS::WAFv2::WebACL', 1);
    expect(() => quick({}, 'eu-west-1')).toThrow(/only be created in us-east-1.*-c webAclArn=.*-c waf=false/);
  });

  it('alarms on OriginRefused exactly as the functions publish it: namespace, name and dimensions', async () => {
    // The metric as recordOriginRefused writes it (Powertools' EMF on stdout), with metrics switched on.
    vi.stubEnv('POWERTOOLS_METRICS_DISABLED', 'false');
    vi.resetModules();
    const lines: string[] = [];
    const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      lines.push(String(chunk));
      return true;
    });
    try {
      const { recordOriginRefused } = await import('../../functions/shared/observability.js');
      recordOriginRefused();
    } finally {
      write.mockRestore();
      vi.unstubAllEnvs();
    }
    const emf = lines
      .flatMap((line) => line.split('\n'))
      .filter((line) => line.includes('"_aws"'))
      .map((line) => JSON.parse(line) as Record<string, unknown> & { _aws: EmfMetadata })
      .find((e) => e._aws.CloudWatchMetrics[0]?.Metrics.some((m) => m.Name === 'OriginRefused'));
    if (!emf) throw new Error(`no OriginRefused EMF line in ${JSON.stringify(lines)}`);
    const [directive] = emf._aws.CloudWatchMetrics;
    const published = Object.fromEntries((directive?.Dimensions[0] ?? []).map((name) => [name, emf[name]]));
    expect(published).toEqual({ service: 'hosted-model-api' });
    for (const { template } of [sandbox, prod]) {
      const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')).filter(
        (a) => (a as { Properties: { MetricName?: string } }).Properties.MetricName === 'OriginRefused',
      ) as {
        Properties: {
          Namespace: string;
          Dimensions: { Name: string; Value: string }[];
          AlarmActions: unknown[];
        };
      }[];
      expect(alarms).toHaveLength(1);
      const [alarm] = alarms;
      expect(alarm?.Properties.Namespace).toBe(directive?.Namespace);
      expect(Object.fromEntries(alarm?.Properties.Dimensions.map((d) => [d.Name, d.Value]) ?? [])).toEqual(
        published,
      );
      expect(alarm?.Properties.AlarmActions).toHaveLength(1);
    }
  });
});

/** The `_aws` metadata of an EMF line (CloudWatch embedded metric format specification). */
interface EmfMetadata {
  CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string }[] }[];
}

describe('least privilege', () => {
  const policies = (template: Template) =>
    Object.entries(template.findResources('AWS::IAM::Policy')).map(([id, p]) => ({
      id,
      statements: (
        p as {
          Properties: { PolicyDocument: { Statement: { Action: string | string[]; Resource: unknown }[] } };
        }
      ).Properties.PolicyDocument.Statement,
    }));

  it('has no "*" action anywhere, and a bare "*" resource only for X-Ray', () => {
    for (const { statements } of policies(prod.template)) {
      for (const statement of statements) {
        const actions = [statement.Action].flat();
        expect(actions.some((a) => a === '*' || a.endsWith(':*'))).toBe(false);
        if ([statement.Resource].flat().includes('*'))
          expect(actions.every((a) => a.startsWith('xray:'))).toBe(true);
      }
    }
  });

  it('gives the models function only the reads (keys, accounts, the ledger) and the origin secret it uses', () => {
    const models = policies(prod.template).find((p) => p.id.startsWith('Models'));
    const actions = new Set(models?.statements.flatMap((s) => [s.Action].flat()));
    expect([...actions].sort()).toEqual([
      'dynamodb:BatchGetItem',
      'dynamodb:GetItem',
      'dynamodb:Query',
      'secretsmanager:GetSecretValue',
      'xray:PutTelemetryRecords',
      'xray:PutTraceSegments',
    ]);
    // The Query (an account's top-ups, GET /credits) on the ledger only: not the keys' indexes.
    const queries = models?.statements.filter((s) => [s.Action].flat().includes('dynamodb:Query'));
    expect(queries?.map((s) => JSON.stringify(s.Resource))).toEqual([
      expect.stringMatching(/^\{"Fn::GetAtt":\["Tablesledger[0-9A-F]{8}","Arn"\]\}$/),
    ]);
  });

  it('gives the completions function exactly its reads, its settlement writes and its two secrets', () => {
    const completions = policies(prod.template).find((p) => p.id.startsWith('Completions'));
    const actions = new Set(completions?.statements.flatMap((s) => [s.Action].flat()));
    expect([...actions].sort()).toEqual([
      'dynamodb:BatchGetItem',
      'dynamodb:ConditionCheckItem',
      'dynamodb:DeleteItem',
      'dynamodb:GetItem',
      'dynamodb:PutItem',
      'dynamodb:UpdateItem',
      'secretsmanager:GetSecretValue',
      'xray:PutTelemetryRecords',
      'xray:PutTraceSegments',
    ]);
    // Holds: placed, given a usage record and deleted on the holds table; the ledger only ever gets
    // new entries (and a deferral's check that one is not there yet).
    const on = (table: string) =>
      completions?.statements
        .filter((s) => JSON.stringify(s.Resource).includes(table))
        .flatMap((s) => [s.Action].flat())
        .sort();
    expect(on('holds')).toEqual(['dynamodb:DeleteItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem']);
    expect(on('ledger')).toEqual(['dynamodb:ConditionCheckItem', 'dynamodb:PutItem']);
  });

  it("gives the usage lines' signing key to exactly the completions function, which signs, and the logged-usage function, which checks", () => {
    for (const { template } of [sandbox, prod]) {
      const secrets = Object.entries(template.findResources('AWS::SecretsManager::Secret')).filter(([id]) =>
        id.startsWith('UsageSigning'),
      );
      expect(secrets).toHaveLength(1);
      const [secretId, secret] = secrets[0] ?? [];
      expect(
        (secret as { Properties: Record<string, unknown> }).Properties.GenerateSecretString,
      ).toMatchObject({
        PasswordLength: 48,
      });
      // Named in the environment of these two functions and no other...
      const named = userFunctions(template)
        .filter(
          ([, fn]) =>
            JSON.stringify(
              (fn as { Properties: { Environment: { Variables: Record<string, unknown> } } }).Properties
                .Environment.Variables.USAGE_SIGNING_SECRET_ARN,
            ) === JSON.stringify({ Ref: secretId }),
        )
        .map(([id]) => id.replace(/Function.*$/, ''))
        .sort();
      expect(named).toEqual(['Completions', 'LoggedUsage']);
      // ...and read (GetSecretValue on it alone) by their roles and no other.
      const readers = policies(template)
        .filter(({ statements }) =>
          statements.some((s) => JSON.stringify(s.Resource).includes(`"Ref":"${secretId}"`)),
        )
        .map(({ id, statements }) => {
          const onKey = statements.filter((s) => JSON.stringify(s.Resource).includes(`"Ref":"${secretId}"`));
          expect(onKey.map((s) => [[s.Action].flat(), s.Resource])).toEqual([
            [['secretsmanager:GetSecretValue'], { Ref: secretId }],
          ]);
          return id.replace(/Function.*$/, '');
        })
        .sort();
      expect(readers).toEqual(['Completions', 'LoggedUsage']);
      expect(Object.keys(template.findOutputs('UsageSigningSecretArn'))).toEqual(['UsageSigningSecretArn']);
    }
  });

  it('gives the logged-usage function the tier configuration the completions function prices by', () => {
    const tiersOf = (template: Template, name: string) => {
      const fn = userFunctions(template).find(([id]) => id.startsWith(name));
      return (fn?.[1] as { Properties: { Environment: { Variables: Record<string, string> } } } | undefined)
        ?.Properties.Environment.Variables.TIERS_CONFIG;
    };
    expect(tiersOf(prod.template, 'LoggedUsage')).toBe(TIERS);
    expect(tiersOf(prod.template, 'LoggedUsage')).toBe(tiersOf(prod.template, 'Completions'));
    // The sandbox's completions function reaches the simulator by URL: priced as singleUpstreamConfig prices it.
    expect(parseTierConfig(JSON.parse(tiersOf(sandbox.template, 'LoggedUsage') ?? '{}'))).toEqual(
      parseTierConfig(singleUpstreamConfig('https://simulator.invalid/v1')),
    );
  });

  it('gives the hold sweeper a scan and delete on the holds table, a read and update on accounts and the ledger Put of a settlement, on a schedule', () => {
    const sweeper = policies(prod.template).find((p) => p.id.startsWith('HoldSweeper'));
    const actions = new Set(sweeper?.statements.flatMap((s) => [s.Action].flat()));
    // The deferred settlements it completes write their ledger entry (TransactWriteItems needs PutItem).
    const onLedger = sweeper?.statements.filter((s) => JSON.stringify(s.Resource).includes('ledger'));
    expect(onLedger?.flatMap((s) => [s.Action].flat())).toEqual(['dynamodb:PutItem']);
    expect([...actions].sort()).toEqual([
      'dynamodb:DeleteItem',
      // It reads the source slice of a transfer between slices before moving it.
      'dynamodb:GetItem',
      'dynamodb:PutItem',
      'dynamodb:Scan',
      'dynamodb:UpdateItem',
      // Its failed asynchronous invocations go to its dead-letter queue.
      'sqs:SendMessage',
      'xray:PutTelemetryRecords',
      'xray:PutTraceSegments',
    ]);
    prod.template.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(1 minute)' });
  });
});

describe('the payments reconciler', () => {
  const policies = (template: Template) =>
    Object.entries(template.findResources('AWS::IAM::Policy')).map(([id, p]) => ({
      id,
      statements: (
        p as {
          Properties: { PolicyDocument: { Statement: { Action: string | string[]; Resource: unknown }[] } };
        }
      ).Properties.PolicyDocument.Statement,
    }));

  it('runs every 10 minutes by EventBridge Scheduler, with a role that may invoke only it and send to its dead-letter queue', () => {
    for (const { template } of [sandbox, prod]) {
      // Its own (the balance watch's, where a dashboard is deployed, are balance-watch-stream.test.ts's).
      const schedules = (
        Object.values(template.findResources('AWS::Scheduler::Schedule')) as {
          Properties: { ScheduleExpression: string; Target: Record<string, unknown> };
        }[]
      ).filter((s) => JSON.stringify(s.Properties.Target.Arn).includes('PaymentsReconcilerFunction'));
      expect(schedules).toHaveLength(1);
      const [schedule] = schedules;
      expect(schedule?.Properties.ScheduleExpression).toBe('rate(10 minutes)');
      expect(schedule?.Properties.Target).toMatchObject({
        Arn: { 'Fn::GetAtt': [expect.stringMatching(/^PaymentsReconcilerFunction/), 'Arn'] },
        RetryPolicy: { MaximumRetryAttempts: 0, MaximumEventAgeInSeconds: 600 },
        DeadLetterConfig: {
          Arn: { 'Fn::GetAtt': [expect.stringMatching(/^PaymentsReconcilerFailures/), 'Arn'] },
        },
      });
      const role = Object.entries(template.findResources('AWS::IAM::Role')).find(([id]) =>
        id.startsWith('PaymentsReconcilerScheduleRole'),
      )?.[1] as {
        Properties: {
          Policies: { PolicyDocument: { Statement: { Action: string; Resource: unknown }[] } }[];
        };
      };
      const statements = role.Properties.Policies.flatMap((p) => p.PolicyDocument.Statement);
      expect(statements.map((st) => st.Action).sort()).toEqual(['lambda:InvokeFunction', 'sqs:SendMessage']);
      // The function's ARN itself, no version or alias wildcard.
      expect(JSON.stringify(statements)).not.toContain(':*');
    }
  });

  it("has the webhook's ledger grants, its checkpoint's, its own Stripe key's read, and the watch items only where the dashboard is", () => {
    for (const [template, dashboard] of [
      [sandbox.template, false],
      [prod.template, true],
    ] as const) {
      const reconciler = policies(template).find((p) => p.id.startsWith('PaymentsReconciler'));
      const on = (table: string) =>
        (reconciler?.statements ?? [])
          .filter((st) => JSON.stringify(st.Resource).toLowerCase().includes(table.toLowerCase()))
          .flatMap((st) => [st.Action].flat())
          .sort();
      expect(on('ledger')).toEqual(['dynamodb:GetItem', 'dynamodb:PutItem']);
      expect(on('accounts')).toEqual(['dynamodb:BatchGetItem', 'dynamodb:GetItem', 'dynamodb:UpdateItem']);
      expect(on('holds')).toEqual(['dynamodb:PutItem']);
      // Its own restricted key's secret, never the webhook's (stripe-keys.ts).
      expect(on('StripeReconcilerKey')).toEqual(['secretsmanager:GetSecretValue']);
      expect(on('StripeCredentials')).toEqual([]);
      expect(on('keys')).toEqual([]);
      expect(on('dashboard').length > 0).toBe(dashboard);
    }
  });

  it('alarms on its errors, its dead-letter queue, no run in an hour, and any event it had to apply', () => {
    const alarms = Object.values(prod.template.findResources('AWS::CloudWatch::Alarm')) as {
      Properties: Record<string, unknown>;
    }[];
    const named = (metric: string) => alarms.filter((a) => a.Properties.MetricName === metric);
    expect(named('PaymentsReconcilerRuns')[0]?.Properties).toMatchObject({
      Threshold: 1,
      ComparisonOperator: 'LessThanThreshold',
      TreatMissingData: 'breaching',
      Period: 3600,
    });
    expect(named('PaymentsReconciled')[0]?.Properties).toMatchObject({
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
    });
    const queueAlarm = alarms.find((a) =>
      JSON.stringify(a.Properties).includes('PaymentsReconcilerFailures'),
    );
    expect(queueAlarm?.Properties.MetricName).toBe('ApproximateNumberOfMessagesVisible');
  });
});

describe('alarms and outputs', () => {
  it('watch the money invariants: accounts below zero, the sweeper heartbeat, DynamoDB throttles and system errors per table', () => {
    const alarms = Object.values(prod.template.findResources('AWS::CloudWatch::Alarm')) as {
      Properties: Record<string, unknown>;
    }[];
    const named = (metric: string) =>
      alarms.filter((a) => JSON.stringify(a.Properties).includes(`"${metric}"`));
    expect(named('NegativeBalanceAccounts')[0]?.Properties).toMatchObject({ Threshold: 1 });
    expect(named('SweeperRuns')[0]?.Properties).toMatchObject({
      Threshold: 1,
      ComparisonOperator: 'LessThanThreshold',
      TreatMissingData: 'breaching',
      Period: 300,
    });
    // The balance watch's heartbeat (prod has it: a custom domain: its scheduled runs, the outbox's every
    // 5 minutes, so three missed) and its dead letters.
    expect(named('BalanceWatchRuns')[0]?.Properties).toMatchObject({
      Threshold: 1,
      ComparisonOperator: 'LessThanThreshold',
      TreatMissingData: 'breaching',
      Period: 900,
    });
    expect(named('EmailsDeadLettered')[0]?.Properties).toMatchObject({
      Threshold: 1,
      TreatMissingData: 'notBreaching',
    });
    // ThrottledRequests is published per table and operation, never per table alone.
    expect(named('ThrottledRequests')).toHaveLength(0);
    // One per table: prod's seven (the team's and the audit log; a custom domain, so the dashboard's too).
    expect(named('ReadThrottleEvents')).toHaveLength(7);
    expect(named('SystemErrors')).toHaveLength(7);
    for (const alarm of alarms) expect(alarm.Properties.AlarmActions).toHaveLength(1);
    prod.template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(15 minutes)',
      Targets: [Match.objectLike({ Input: JSON.stringify({ check: 'balances' }) })],
    });
    prod.template.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
    // The generation metrics are read from the completions log's usage lines, per tier
    // (test/integration/logging.test.ts checks the paths on a logged line).
    const completionsLogs = Object.keys(prod.template.findResources('AWS::Logs::LogGroup')).filter((id) =>
      id.startsWith('CompletionsLogs'),
    );
    expect(completionsLogs).toHaveLength(1);
    const filters = Object.values(prod.template.findResources('AWS::Logs::MetricFilter')) as {
      Properties: { LogGroupName: unknown; FilterPattern: string; MetricTransformations: unknown[] };
    }[];
    expect(filters).toHaveLength(GENERATION_METRICS.length);
    for (const { metricName, value } of GENERATION_METRICS) {
      expect(filters).toContainEqual({
        Type: 'AWS::Logs::MetricFilter',
        Properties: {
          LogGroupName: { Ref: completionsLogs[0] },
          FilterPattern: '{ $.message = "generation usage" }',
          MetricTransformations: [
            {
              MetricNamespace: 'HostedModelApi',
              MetricName: metricName,
              MetricValue: value,
              Dimensions: [{ Key: 'tier', Value: GENERATION_METRIC_DIMENSIONS.tier }],
              Unit: 'Count',
            },
          ],
        },
      });
    }
    // The dashboard sums every tier's billed amount (a metric without the tier would have no data).
    const dashboard = JSON.stringify(
      Object.values(prod.template.findResources('AWS::CloudWatch::Dashboard'))[0],
    );
    // The body is JSON inside the template's JSON: a text appears in it escaped twice.
    const inBody = (text: string) => JSON.stringify(JSON.stringify(text)).slice(3, -3);
    expect(dashboard).toContain(inBody(`SUM(SEARCH('${BILLED_SEARCH}', 'Sum', 300))`));
    expect(dashboard).not.toContain(inBody('"BilledMicroUsd","service"'));
    expect(BILLED_SEARCH).toBe('{HostedModelApi,tier} MetricName="BilledMicroUsd"');
  });

  it("cap each table's throughput and set a monthly budget when asked, and not otherwise", () => {
    const tables = Object.values(prod.template.findResources('AWS::DynamoDB::GlobalTable')) as {
      Properties: {
        WriteOnDemandThroughputSettings?: unknown;
        Replicas: { ReadOnDemandThroughputSettings?: unknown }[];
      };
    }[];
    expect(tables).toHaveLength(7); // the team's, the audit log's and the dashboard's too: the same guardrail
    for (const table of tables) {
      expect(table.Properties.WriteOnDemandThroughputSettings).toEqual({ MaxWriteRequestUnits: 500 });
      expect(table.Properties.Replicas[0]?.ReadOnDemandThroughputSettings).toEqual({
        MaxReadRequestUnits: 1_000,
      });
    }
    prod.template.hasResourceProperties('AWS::Budgets::Budget', {
      Budget: Match.objectLike({ BudgetLimit: { Amount: 200, Unit: 'USD' }, TimeUnit: 'MONTHLY' }),
    });
    sandbox.template.resourceCountIs('AWS::Budgets::Budget', 0);
  });

  it('alarm on 5xx rate, billing failures, throttles and errors, notifying the alarm topic', () => {
    const alarms = Object.values(prod.template.findResources('AWS::CloudWatch::Alarm')) as {
      Properties: Record<string, unknown>;
    }[];
    const names = alarms.map((a) => JSON.stringify(a.Properties));
    // Completions, models, payments, the sweeper, the payments reconciler and (prod has a custom domain)
    // the dashboard and the balance watch.
    expect(alarms.filter((a) => a.Properties.MetricName === 'Errors')).toHaveLength(7);
    for (const metric of [
      'PaymentsWebhookFailures',
      'PaymentsSignatureFailures',
      'PaymentsUnknownAccounts',
      'PaymentsDisputes',
    ])
      expect(alarms.filter((a) => a.Properties.MetricName === metric)).toHaveLength(1);
    expect(alarms.filter((a) => a.Properties.MetricName === 'ExpiredHoldsReleased')).toHaveLength(1);
    expect(alarms.filter((a) => a.Properties.MetricName === 'Throttles')).toHaveLength(2);
    expect(alarms.filter((a) => a.Properties.MetricName === 'BillingFailures')).toHaveLength(1);
    expect(alarms.filter((a) => a.Properties.MetricName === 'UsageOutOfBounds')).toHaveLength(1);
    expect(names.filter((n) => n.includes('Url5xxCount'))).toHaveLength(2);
    for (const alarm of alarms) expect(alarm.Properties.AlarmActions).toBeDefined();
    prod.template.hasResourceProperties('AWS::SNS::Subscription', {
      Protocol: 'email',
      Endpoint: 'ops@example.com',
    });
  });

  it('output the base URL, the table names and the secret ARN', () => {
    const outputs = Object.keys(prod.template.findOutputs('*'));
    for (const name of [
      'BaseUrl',
      'KeysTableName',
      'AccountsTableName',
      'LedgerTableName',
      'UpstreamSecretArn',
    ])
      expect(outputs).toContain(name);
  });
});
