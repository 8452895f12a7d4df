import { describe, expect, it } from 'vitest';
import { WEBHOOK_RESERVED_CONCURRENCY } from '../../lib/infra/payments.js';
import { type Resource, resources, synthStages } from './synth-offline.js';

/**
 * Stripe's webhook at the edge, as synthesized: CloudFront sends the secret origin header to its
 * origin (the payments function refuses its bare URL without it, test/integration/origin-rotation.test.ts),
 * and the function runs at most its reserved concurrency at once.
 */
const stackOf = synthStages();

function one(all: Record<string, Resource>, type: string, prefix = ''): [string, Resource] {
  const found = Object.entries(all).filter(([id, r]) => r.Type === type && id.startsWith(prefix));
  expect(found, `${type} ${prefix}*`).toHaveLength(1);
  return found[0] as [string, Resource];
}

describe.each(['sandbox', 'prod'] as const)("Stripe's webhook at the edge (%s)", (stage) => {
  it('is reached at /stripe/webhook through an origin that carries the origin header, with no key check', () => {
    const all = resources(stackOf(stage).template);
    const [urlId] = one(all, 'AWS::Lambda::Url', 'PaymentsFunctionFunctionUrl');
    const config = (
      one(all, 'AWS::CloudFront::Distribution')[1].Properties as {
        DistributionConfig: {
          CacheBehaviors: { PathPattern: string; TargetOriginId: string; FunctionAssociations?: unknown }[];
          Origins: { Id: string; DomainName: unknown; OriginCustomHeaders?: { HeaderName: string }[] }[];
        };
      }
    ).DistributionConfig;
    const origin = config.Origins.find((o) => JSON.stringify(o.DomainName).includes(urlId));
    expect(origin?.OriginCustomHeaders?.map((h) => h.HeaderName)).toEqual(['x-origin-verify']);
    const behaviour = config.CacheBehaviors.find((b) => b.PathPattern === '/stripe/webhook');
    expect(behaviour?.TargetOriginId).toBe(origin?.Id);
    expect(behaviour).not.toHaveProperty('FunctionAssociations');
  });

  it('tells the payments function where the origin secret is', () => {
    const all = resources(stackOf(stage).template);
    const [, fn] = one(all, 'AWS::Lambda::Function', 'PaymentsFunction');
    const variables = (
      (fn.Properties as Record<string, unknown>).Environment as { Variables: Record<string, unknown> }
    ).Variables;
    const [secretId] = one(all, 'AWS::SecretsManager::Secret', 'OriginVerify');
    expect(variables.ORIGIN_VERIFY_SECRET_ARN).toEqual({ Ref: secretId });
  });

  it('runs at most a few webhooks at once where the stack reserves concurrency (past it Lambda answers 429, which Stripe retries)', () => {
    const [, fn] = one(resources(stackOf(stage).template), 'AWS::Lambda::Function', 'PaymentsFunction');
    expect(WEBHOOK_RESERVED_CONCURRENCY).toBeGreaterThanOrEqual(5);
    expect(WEBHOOK_RESERVED_CONCURRENCY).toBeLessThanOrEqual(10);
    // Prod's test stage reserves (-c reservedConcurrency); the sandbox reserves nothing, so that it
    // deploys on an account of any quota (test/infra/new-account.test.ts).
    expect(fn.Properties?.ReservedConcurrentExecutions).toBe(
      stage === 'prod' ? WEBHOOK_RESERVED_CONCURRENCY : undefined,
    );
  });
});
