import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { ApiStack, type ApiStackProps, CONCURRENCY_REQUIRED } from '../../lib/infra/api-stack.js';
import { WEBHOOK_RESERVED_CONCURRENCY } from '../../lib/infra/payments.js';
import { PROD_PROPS, type Resource, resources, synthOffline, synthStages } from './synth-offline.js';

/**
 * A deploy on a new AWS account: its concurrency quota can be small, and a reservation may not bring
 * the account's unreserved concurrency below Lambda's minimum, so nothing is reserved unless asked.
 * The overdraft bound still knows how many completions can run at once (MAX_CONCURRENCY): from
 * maxConcurrency without a reservation, or from reservedConcurrency with one.
 */
const stackOf = synthStages();
const { reservedConcurrency: _, ...PROD_WITHOUT_CONCURRENCY } = PROD_PROPS;

const functions = (template: Template) =>
  Object.entries(resources(template)).filter(
    ([, r]) =>
      r.Type === 'AWS::Lambda::Function' &&
      (r.Properties?.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables
        ?.POWERTOOLS_SERVICE_NAME !== undefined,
  );
const fn = (template: Template, prefix: string) => {
  const found = functions(template).find(([id]) => id.startsWith(prefix));
  if (!found) throw new Error(`no ${prefix} function`);
  return found[1].Properties ?? {};
};
const reserving = (template: Template) =>
  functions(template)
    .filter(([, r]) => r.Properties?.ReservedConcurrentExecutions !== undefined)
    .map(([id, r]) => [id.replace(/Function[0-9A-F]{8}$/, ''), r.Properties?.ReservedConcurrentExecutions]);
const maxConcurrency = (template: Template) =>
  (fn(template, 'CompletionsFunction').Environment as { Variables: Record<string, string> }).Variables
    .MAX_CONCURRENCY;
const concurrencyAlarm = (template: Template) =>
  Object.values(resources(template)).filter(
    (r: Resource) =>
      r.Type === 'AWS::CloudWatch::Alarm' && r.Properties?.MetricName === 'ConcurrentExecutions',
  );
const quick = (props: ApiStackProps) =>
  Template.fromStack(new ApiStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'Quick', props));

describe('a prod stage without any reservation (-c maxConcurrency=<n>)', () => {
  const synth = () => synthOffline({ ...PROD_WITHOUT_CONCURRENCY, maxConcurrency: 800 }, 'NewAccount-prod');

  it('reserves no concurrency anywhere, gives the overdraft bound n, alarms at 80% of n, and passes cdk-nag', () => {
    const { template, nag } = synth();
    expect(reserving(template)).toEqual([]);
    expect(maxConcurrency(template)).toBe('800');
    expect(concurrencyAlarm(template)).toEqual([
      expect.objectContaining({
        Properties: expect.objectContaining({
          Namespace: 'AWS/Lambda',
          Statistic: 'Maximum',
          Threshold: 640,
          ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        }),
      }),
    ]);
    expect(nag?.violations).toEqual([]);
    expect(nag?.conclusion).toBe('success');
  });
});

describe('a prod stage with a reservation (-c reservedConcurrency=<n>)', () => {
  it("reserves n for completions, which is also the bound, and a few for Stripe's webhook: the sweeper reserves nothing unless asked", () => {
    const { template } = stackOf('prod');
    expect(reserving(template)).toEqual([
      ['Completions', PROD_PROPS.reservedConcurrency],
      ['Payments', WEBHOOK_RESERVED_CONCURRENCY],
    ]);
    expect(maxConcurrency(template)).toBe(String(PROD_PROPS.reservedConcurrency));
  });

  it('reserves 1 for the sweeper with -c reserveSweeper=true', () => {
    const template = quick({ ...PROD_PROPS, reserveSweeper: true });
    expect(reserving(template)).toEqual([
      ['Completions', PROD_PROPS.reservedConcurrency],
      ['HoldSweeper', 1],
      ['Payments', WEBHOOK_RESERVED_CONCURRENCY],
    ]);
  });
});

describe('the sandbox', () => {
  it('reserves nothing, so it deploys on an account of any quota; the bound is the default account limit', () => {
    const { template } = stackOf('sandbox');
    expect(reserving(template)).toEqual([]);
    expect(maxConcurrency(template)).toBe('1000');
    expect(concurrencyAlarm(template)).toEqual([]);
  });

  it('takes maxConcurrency too', () => {
    expect(maxConcurrency(quick({ stage: 'sandbox', maxConcurrency: 10 }))).toBe('10');
  });
});

describe('a prod synth without the bound', () => {
  it('fails saying both ways to give it and how to check the quota first', () => {
    expect(() => quick(PROD_WITHOUT_CONCURRENCY)).toThrow(CONCURRENCY_REQUIRED);
    for (const part of [
      '-c maxConcurrency=<n>',
      '-c reservedConcurrency=<n>',
      'aws lambda get-account-settings',
      'ConcurrentExecutions',
      'UnreservedConcurrentExecutions',
    ])
      expect(CONCURRENCY_REQUIRED).toContain(part);
  });

  it('refuses both values at once, and a value that is not a whole number from 1', () => {
    expect(() => quick({ ...PROD_PROPS, maxConcurrency: 800 })).toThrow(/not both/);
    expect(() => quick({ ...PROD_WITHOUT_CONCURRENCY, maxConcurrency: 2.5 })).toThrow(
      /maxConcurrency must be a whole number/,
    );
    expect(() => quick({ ...PROD_WITHOUT_CONCURRENCY, reservedConcurrency: 0 })).toThrow(
      /reservedConcurrency must be a whole number/,
    );
  });
});
