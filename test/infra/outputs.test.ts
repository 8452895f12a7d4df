import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { ApiStack } from '../../lib/infra/api-stack.js';

/** What the runbooks (README, docs/deploy.md) read from the stack's outputs. */
describe('stack outputs', () => {
  it("the origin secret's ARN, which the rotation runbook puts a new value into", () => {
    const template = Template.fromStack(
      new ApiStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'OutputsTest', {
        stage: 'sandbox',
      }),
    );
    const secrets = template.findResources('AWS::SecretsManager::Secret');
    const origin = Object.keys(secrets).filter((id) => id.startsWith('OriginVerify'));
    expect(origin).toHaveLength(1);
    expect(template.findOutputs('OriginSecretArn')).toEqual({
      OriginSecretArn: expect.objectContaining({ Value: { Ref: origin[0] } }),
    });
    for (const name of [
      'BaseUrl',
      'KeysTableName',
      'AccountsTableName',
      'LedgerTableName',
      'HoldsTableName',
      'AuditTableName',
      'UpstreamSecretArn',
    ])
      expect(Object.keys(template.findOutputs(name)), name).toEqual([name]);
  }, 240_000); // synthesis bundles the functions with esbuild: a minute on a busy machine
});
