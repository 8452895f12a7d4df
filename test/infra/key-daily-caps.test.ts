import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { ApiStack } from '../../lib/infra/api-stack.js';
import { PROD_DOMAIN, PROD_PROPS, type Resource, resources } from './synth-offline.js';

/**
 * Per-key daily spend caps as the stack deploys them: off unless `cdk deploy -c keyDailyCaps=true`,
 * which sets KEY_DAILY_CAPS=on on the functions that read a cap (completions, the account function
 * "Models" for /key, the dashboard) and tells completions where the cap's 402 sends the customer.
 */
function functionEnvs(context: Record<string, string> = {}): Record<string, Record<string, unknown>> {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [], ...context } });
  const all = resources(Template.fromStack(new ApiStack(app, 'Caps', PROD_PROPS)));
  return Object.fromEntries(
    Object.entries(all)
      .filter(([, r]) => r.Type === 'AWS::Lambda::Function')
      .map(([id, r]: [string, Resource]) => [
        id,
        (r.Properties?.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ?? {},
      ]),
  );
}

const withCaps = (envs: Record<string, Record<string, unknown>>) =>
  Object.keys(envs)
    .filter((id) => envs[id]?.KEY_DAILY_CAPS !== undefined)
    .map((id) => id.replace(/Function.*$/, ''))
    .sort();

describe('per-key daily caps in the stack', () => {
  it('are off without context (or with -c keyDailyCaps=false), and -c keyDailyCaps=true sets KEY_DAILY_CAPS=on on completions, models and the dashboard only', () => {
    const off = functionEnvs();
    expect(Object.keys(off).length).toBeGreaterThan(3);
    expect(withCaps(off)).toEqual([]);
    expect(Object.values(off).filter((env) => env.KEY_CAPS_URL !== undefined)).toEqual([]);
    expect(withCaps(functionEnvs({ keyDailyCaps: 'false' }))).toEqual([]);

    const on = functionEnvs({ keyDailyCaps: 'true' });
    expect(withCaps(on)).toEqual(['Completions', 'Dashboard', 'Models']);
    for (const env of Object.values(on))
      if (env.KEY_DAILY_CAPS !== undefined) expect(env.KEY_DAILY_CAPS).toBe('on');
    const completions = Object.entries(on).find(([id]) => id.startsWith('Completions'))?.[1];
    // The cap's 402 names Settings → API, where a key's cap is set (Billing does not lift a cap).
    expect(completions?.KEY_CAPS_URL).toBe(`https://${PROD_DOMAIN.domainName}/dashboard/settings/api`);
  }, 180_000);

  it('refuses any other value by name', () => {
    expect(() => functionEnvs({ keyDailyCaps: 'yes' })).toThrow(
      /keyDailyCaps must be true or false, got yes/,
    );
  });
});
