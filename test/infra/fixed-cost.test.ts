/**
 * The prod stack's fixed monthly cost, counted from its synthesized template (prod always has its
 * custom domain, so its dashboard) and priced from the table below, held equal to the total
 * docs/cost.md states.
 */
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { PROD_PROPS, type Resource, resources, synthOffline, TIERS } from './synth-offline.js';

/**
 * List prices, US East, no free tier, in cents a month. Sources: aws.amazon.com/cloudwatch/pricing
 * (alarm metric, dashboard, custom metric), aws.amazon.com/waf/pricing (web ACL, rule),
 * aws.amazon.com/secrets-manager/pricing (secret), aws.amazon.com/kms/pricing (customer managed key).
 */
const PRICE_CENTS = {
  alarmMetric: 10,
  dashboard: 300,
  customMetric: 30,
  webAcl: 500,
  wafRule: 100,
  secret: 40,
  kmsKey: 100,
} as const;

type Counts = Record<keyof typeof PRICE_CENTS, number>;

function fixedCounts(all: Record<string, Resource>): Counts {
  const of = (type: string) => Object.values(all).filter((r) => r.Type === type);
  const tiers = Object.keys(JSON.parse(TIERS) as Record<string, unknown>).length;
  return {
    // A standard-resolution alarm is billed per metric it reads: a metric-math alarm per metric in it.
    alarmMetric: of('AWS::CloudWatch::Alarm')
      .map((a) => {
        const metrics = a.Properties?.Metrics as { MetricStat?: unknown }[] | undefined;
        return metrics ? metrics.filter((m) => m.MetricStat !== undefined).length : 1;
      })
      .reduce((a, b) => a + b, 0),
    dashboard: of('AWS::CloudWatch::Dashboard').length,
    // A metric filter's metric is one custom metric per dimension value: per tier where it has one.
    customMetric: of('AWS::Logs::MetricFilter')
      .flatMap((f) => f.Properties?.MetricTransformations as { Dimensions?: unknown[] }[])
      .map((t) => (t.Dimensions?.length ? tiers : 1))
      .reduce((a, b) => a + b, 0),
    webAcl: of('AWS::WAFv2::WebACL').length,
    wafRule: of('AWS::WAFv2::WebACL')
      .map((w) => ((w.Properties as Record<string, unknown>).Rules as unknown[]).length)
      .reduce((a, b) => a + b, 0),
    secret: of('AWS::SecretsManager::Secret').length,
    kmsKey: of('AWS::KMS::Key').length,
  };
}

const cents = (counts: Counts) =>
  (Object.keys(counts) as (keyof Counts)[]).reduce((sum, k) => sum + counts[k] * PRICE_CENTS[k], 0);
const dollars = (c: number) => `$${(c / 100).toFixed(2)}`;

let prod: Counts;
beforeAll(() => {
  prod = fixedCounts(resources(synthOffline(PROD_PROPS, 'Cost').template));
}, 600_000);

describe('the fixed monthly cost', () => {
  it('is what docs/cost.md states', () => {
    const doc = readFileSync(new URL('../../docs/cost.md', import.meta.url), 'utf8');
    expect(doc, JSON.stringify(prod)).toContain(`The total: **${dollars(cents(prod))}** a month`);
  });
});
