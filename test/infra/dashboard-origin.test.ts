import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { ApiStack, type ApiStackProps } from '../../lib/infra/api-stack.js';
import { ConfigurationError } from '../../lib/infra/configuration-error.js';
import { dashboardHostCode } from '../../lib/infra/edge-function.js';
import { checkDashboardOrigin, checkTopUpUrl, isPlaceholderHost } from '../../lib/infra/public-origin.js';
import {
  PROD_DOMAIN,
  PROD_PROPS,
  type Resource,
  resources,
  type Synthesized,
  synthOffline,
} from './synth-offline.js';

/**
 * Where a customer is sent to pay, on every stage: prod only with a custom domain (its billing page is
 * the 402's topUpUrl), a sandbox's dashboard on a literal origin (`-c dashboardOrigin=`, the
 * distribution's own name after a first deploy), no placeholder URL in any 402, and the distribution's
 * own name redirected to the custom domain on the dashboard's paths.
 */

/** A stack without bundling or cdk-nag, for a refusal or one property. */
const quick = (props: ApiStackProps) =>
  Template.fromStack(new ApiStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'Quick', props));
const refusal = (props: ApiStackProps) => {
  try {
    quick(props);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigurationError);
    return (error as Error).message;
  }
  throw new Error('the stack was built');
};

const { domainName: _domain, certificateArn: _certificate, ...PROD_WITHOUT_DOMAIN } = PROD_PROPS;
const SANDBOX_ORIGIN = 'https://d111111abcdef8.cloudfront.net';

const ofType = (all: Record<string, Resource>, type: string) =>
  Object.entries(all).filter(([, r]) => r.Type === type);
const functionNamed = (all: Record<string, Resource>, prefix: string) => {
  const found = ofType(all, 'AWS::Lambda::Function').filter(([id]) => id.startsWith(prefix));
  expect(found, prefix).toHaveLength(1);
  return (
    (found[0] as [string, Resource])[1].Properties as { Environment: { Variables: Record<string, unknown> } }
  ).Environment.Variables;
};
type Behaviour = { PathPattern: string; FunctionAssociations?: { FunctionARN: unknown }[] };
const distributionConfig = (all: Record<string, Resource>) =>
  (
    (ofType(all, 'AWS::CloudFront::Distribution')[0] as [string, Resource])[1].Properties as {
      DistributionConfig: { CacheBehaviors: Behaviour[]; DefaultCacheBehavior: Behaviour };
    }
  ).DistributionConfig;

describe('the checks of -c topUpUrl and -c dashboardOrigin', () => {
  it('knows the placeholder names: example.com/.org/.net and under them, .example, .invalid, .test, .localhost', () => {
    for (const host of [
      'example.com',
      'dashboard.example.com',
      'EXAMPLE.org',
      'a.b.example.net',
      'example.com.',
      'pay.example',
      'no-dashboard.invalid',
      'billing.test',
      'localhost',
      'app.localhost',
    ])
      expect(isPlaceholderHost(host), host).toBe(true);
    for (const host of [
      'acme.com',
      'myexample.com',
      'example.co',
      'example.com.au',
      'testing.io',
      'd1.cloudfront.net',
    ])
      expect(isPlaceholderHost(host), host).toBe(false);
  });

  it('takes an https topUpUrl on a host of your own, and refuses http, a placeholder host or no URL', () => {
    expect(checkTopUpUrl('https://pay.acme.com/top-up?from=402')).toBe(
      'https://pay.acme.com/top-up?from=402',
    );
    for (const bad of [
      'http://pay.acme.com/top-up',
      'https://dashboard.example.com/settings/billing',
      'https://example.org/',
      'https://pay.example/x',
      'https://billing.test/',
      'https://no-dashboard.invalid/',
      'https://app.localhost/billing',
      'pay.acme.com/top-up',
    ])
      expect(() => checkTopUpUrl(bad), bad).toThrow(ConfigurationError);
  });

  it('takes an https origin without a path as dashboardOrigin, and refuses anything else', () => {
    expect(checkDashboardOrigin(SANDBOX_ORIGIN)).toBe(SANDBOX_ORIGIN);
    expect(checkDashboardOrigin(`${SANDBOX_ORIGIN}/`)).toBe(SANDBOX_ORIGIN);
    expect(checkDashboardOrigin('https://sandbox.acme.dev')).toBe('https://sandbox.acme.dev');
    for (const bad of [
      'http://d111111abcdef8.cloudfront.net',
      `${SANDBOX_ORIGIN}/dashboard`,
      `${SANDBOX_ORIGIN}/api/v1`,
      `${SANDBOX_ORIGIN}?x=1`,
      `${SANDBOX_ORIGIN}#x`,
      'https://user:pw@d111111abcdef8.cloudfront.net',
      'https://dashboard.example.com',
      'd111111abcdef8.cloudfront.net',
    ])
      expect(() => checkDashboardOrigin(bad), bad).toThrow(ConfigurationError);
  });
});

describe('the stack refuses, before anything is built', () => {
  it('a prod stage without a custom domain: no dashboard, so no way to pay', () => {
    expect(refusal(PROD_WITHOUT_DOMAIN)).toMatch(
      /^the prod stage needs a custom domain: -c domainName=<name> -c certificateArn=.*no customer can pay$/,
    );
  });

  it('half a custom domain, on either stage', () => {
    for (const stage of ['sandbox', 'prod'] as const) {
      const base = stage === 'prod' ? PROD_WITHOUT_DOMAIN : { stage };
      expect(refusal({ ...base, domainName: PROD_DOMAIN.domainName })).toMatch(/needs both -c domainName/);
      expect(refusal({ ...base, certificateArn: PROD_DOMAIN.certificateArn })).toMatch(
        /needs both -c domainName/,
      );
    }
  });

  it('a dashboardOrigin beside a custom domain, or in prod', () => {
    expect(refusal({ ...PROD_PROPS, dashboardOrigin: SANDBOX_ORIGIN })).toMatch(
      /^dashboardOrigin is for a sandbox/,
    );
    expect(refusal({ stage: 'sandbox', ...PROD_DOMAIN, dashboardOrigin: SANDBOX_ORIGIN })).toMatch(
      /^dashboardOrigin is for a sandbox/,
    );
    expect(refusal({ stage: 'sandbox', dashboardOrigin: `${SANDBOX_ORIGIN}/dashboard` })).toMatch(
      /^dashboardOrigin must be an https origin with no path/,
    );
  });

  it('a placeholder or plain-http topUpUrl, on either stage', () => {
    const placeholder = 'https://dashboard.example.com/settings/billing';
    expect(refusal({ ...PROD_PROPS, topUpUrl: placeholder })).toMatch(/^topUpUrl must be a page of your own/);
    expect(refusal({ stage: 'sandbox', topUpUrl: placeholder })).toMatch(
      /^topUpUrl must be a page of your own/,
    );
    expect(refusal({ stage: 'sandbox', topUpUrl: 'http://pay.acme.com/' })).toMatch(
      /^topUpUrl must be an https URL/,
    );
  });
});

describe('a sandbox given -c dashboardOrigin (its second deploy)', () => {
  let synth: Synthesized;
  beforeAll(() => {
    synth = synthOffline({ stage: 'sandbox', dashboardOrigin: SANDBOX_ORIGIN }, 'Test-sandbox-dashboard');
  }, 240_000);
  const all = () => resources(synth.template);

  it('deploys the dashboard on that origin: its origin check, its Cognito callback and sign-out URLs', () => {
    expect(functionNamed(all(), 'DashboardFunction').DASHBOARD_ORIGIN).toBe(SANDBOX_ORIGIN);
    synth.template.hasResourceProperties('AWS::Cognito::UserPoolClient', {
      CallbackURLs: [`${SANDBOX_ORIGIN}/dashboard/callback`],
      LogoutURLs: [`${SANDBOX_ORIGIN}/dashboard/`],
    });
    expect(synth.template.findOutputs('DashboardUrl').DashboardUrl?.Value).toBe(
      `${SANDBOX_ORIGIN}/dashboard/`,
    );
  });

  it("points the 402's topUpUrl at its billing page there", () => {
    expect(functionNamed(all(), 'CompletionsFunction').TOP_UP_URL).toBe(
      `${SANDBOX_ORIGIN}/dashboard/billing`,
    );
  });

  it('routes /dashboard and /dashboard/* to it with no viewer-request function (no other name to redirect from)', () => {
    const config = distributionConfig(all());
    const site = config.CacheBehaviors.filter((b) => b.PathPattern.startsWith('/dashboard'));
    expect(site.map((b) => b.PathPattern)).toEqual(['/dashboard', '/dashboard/*']);
    for (const behaviour of site) expect(behaviour).not.toHaveProperty('FunctionAssociations');
    expect(ofType(all(), 'AWS::CloudFront::Function').map(([id]) => id)).toEqual([
      expect.stringMatching(/^ViewerRequest/),
    ]);
  });

  it('has no literal of its own origin in the distribution (no cycle) and keeps cdk-nag clean', () => {
    expect(JSON.stringify(distributionConfig(all()))).not.toContain('d111111abcdef8');
    expect(synth.nag?.violations).toEqual([]);
  });
});

describe('a sandbox without one (its first deploy)', () => {
  it('has no dashboard, and its 402 names a page under .invalid, never a placeholder of someone else', () => {
    const template = quick({ stage: 'sandbox' });
    expect(ofType(resources(template), 'AWS::Cognito::UserPool')).toEqual([]);
    const topUp = functionNamed(resources(template), 'CompletionsFunction').TOP_UP_URL as string;
    expect(new URL(topUp).hostname).toMatch(/\.invalid$/);
    expect(topUp).not.toMatch(/example\.(com|org|net)/);
  });
});

describe('prod with its custom domain', () => {
  let all: Record<string, Resource>;
  beforeAll(() => {
    all = resources(quick(PROD_PROPS));
  }, 240_000);

  it("derives the 402's topUpUrl from the domain's billing page", () => {
    expect(functionNamed(all, 'CompletionsFunction').TOP_UP_URL).toBe(
      `https://${PROD_DOMAIN.domainName}/dashboard/billing`,
    );
  });

  it("redirects the distribution's own name on /dashboard and /dashboard/* only: a function on those behaviours", () => {
    const functions = ofType(all, 'AWS::CloudFront::Function');
    const [hostId, host] = functions.find(([id]) => id.startsWith('DashboardHost')) ?? ['', {}];
    expect((host.Properties as { FunctionCode: string }).FunctionCode).toBe(
      dashboardHostCode(PROD_DOMAIN.domainName),
    );
    const config = distributionConfig(all);
    const uses = (b: Behaviour) => JSON.stringify(b.FunctionAssociations ?? []).includes(`"${hostId}"`);
    expect(config.CacheBehaviors.filter(uses).map((b) => b.PathPattern)).toEqual([
      '/dashboard',
      '/dashboard/*',
    ]);
    expect(uses(config.DefaultCacheBehavior)).toBe(false);
  });
});
