import { readFileSync } from 'node:fs';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { ApiStack } from '../../lib/infra/api-stack.js';
import { FUNCTION_SETTINGS } from '../../lib/infra/function-settings.js';
import { PROD_DOMAIN } from './synth-offline.js';

/** The functions' memory sizes (issue 15): measured defaults, and a CDK context value per function. */
/** The repository's example tier configuration (a prod stack parses it at synth). */
const TIERS = readFileSync(new URL('../../config/tiers.example.json', import.meta.url), 'utf8');

function memorySizes(context: Record<string, unknown> = {}): Record<string, number> {
  // Without bundling: the memory sizes are what is read, not the functions' code.
  const app = new App({ context: { ...context, 'aws:cdk:bundling-stacks': [] } });
  const stack = new ApiStack(app, 'MemoryTest', {
    stage: 'prod',
    tiersConfig: TIERS,
    reservedConcurrency: 10,
    alarmEmail: 'ops@example.com',
    monthlyBudgetUsd: 100,
    // Prod needs a custom domain (the dashboard, where customers pay).
    ...PROD_DOMAIN,
  });
  const functions = Template.fromStack(stack).findResources('AWS::Lambda::Function');
  const sizes: Record<string, number> = {};
  for (const [logicalId, resource] of Object.entries(functions)) {
    const props = (resource as { Properties: { MemorySize?: number; Handler?: string } }).Properties;
    const name = /^(Completions|Models)/.exec(logicalId)?.[1];
    if (name && props.MemorySize !== undefined) sizes[name] = props.MemorySize;
  }
  return sizes;
}

let defaults: Record<string, number>;
beforeAll(() => {
  defaults = memorySizes();
}, 120_000);

describe('function memory sizes', () => {
  it('defaults to the sizes chosen from the benchmark', () => {
    expect(defaults).toEqual({
      Completions: FUNCTION_SETTINGS.completions.memoryMb,
      Models: FUNCTION_SETTINGS.models.memoryMb,
    });
    expect(FUNCTION_SETTINGS.completions.memoryMb).toBeLessThan(1024);
  });

  it('takes each function size from its own context value', () => {
    expect(memorySizes({ completionsMemorySize: '512' })).toEqual({
      Completions: 512,
      Models: FUNCTION_SETTINGS.models.memoryMb,
    });
    expect(memorySizes({ modelsMemorySize: 1769 })).toEqual({
      Completions: FUNCTION_SETTINGS.completions.memoryMb,
      Models: 1769,
    });
  }, 120_000);

  it.each(['64', '10241', '300.5', 'lots'])('rejects completionsMemorySize=%s', (value) => {
    expect(() => memorySizes({ completionsMemorySize: value })).toThrow(
      /completionsMemorySize must be a whole number of MB/,
    );
  });
});
