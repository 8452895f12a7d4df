import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as admin from '../../lib/admin/operations.js';
import { CiBootstrapStack, SANDBOX_SUITE_DYNAMODB_ACTIONS } from '../../lib/infra/ci-bootstrap-stack.js';
import { startTarget, type Target } from '../support/target.js';

/**
 * The sandbox role can run the contract suite against a deployed sandbox, and nothing more. What the
 * suite does to DynamoDB with the job's credentials is what it calls of the operator's functions
 * (lib/admin/operations.ts) through test/support/target.ts; the functions' own calls are made with
 * their roles. Which admin functions: found by name in the suite's files. Each is run here with the
 * sandbox role's credentials through the local IAM layer, which holds every call, and every item of
 * a transaction, to that role's policy as the CI stack synthesizes it (lib/local/iam.ts): a missing
 * grant is refused there as AWS refuses it. What each needed: the IAM actions the layer allowed.
 */
const ROOT = join(import.meta.dirname, '../..');
const SUITE_FILES = [
  ...readdirSync(join(ROOT, 'test/contract'))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `test/contract/${f}`),
  'test/support/target.ts',
  'test/support/settled.ts',
  'test/support/contract.ts',
  'test/support/sse.ts',
  'test/support/fake-upstream.ts',
];
const source = SUITE_FILES.map((f) => readFileSync(join(ROOT, f), 'utf8')).join('\n');
const ADMIN_FUNCTIONS = Object.entries(admin)
  .filter(([, value]) => typeof value === 'function' && !/^[A-Z]/.test(String(value.name)))
  .map(([name]) => name);
const used = ADMIN_FUNCTIONS.filter((name) => new RegExp(`\\b${name}\\(`).test(source));

/** How to call each admin function the suite uses, the way it uses it (a new one must be added). */
async function exercise(name: string, ctx: admin.AdminContext, accountId: string): Promise<void> {
  switch (name) {
    case 'createAccount':
      await admin.createAccount(ctx, `${accountId}-empty`, undefined);
      return void (await admin.createAccount(ctx, accountId, '5'));
    case 'createKey':
      return void (await admin.createKey(ctx, accountId, 'test'));
    case 'getAccount':
      return void (await admin.getAccount(ctx, accountId));
    case 'showAccount':
      return void (await admin.showAccount(ctx, accountId));
    case 'setAccountStatus':
      await admin.setAccountStatus(ctx, accountId, 'suspended');
      return void (await admin.setAccountStatus(ctx, accountId, 'active'));
    case 'revokeKey': {
      const { keyId } = await admin.createKey(ctx, accountId, 'to revoke');
      return void (await admin.revokeKey(ctx, keyId));
    }
    case 'listLedger':
      return void (await admin.listLedger(ctx, accountId));
    default:
      throw new Error(`the contract suite calls ${name}: say here how it calls it`);
  }
}

let target: Target;
const derived = new Set<string>();
beforeAll(async () => {
  target = await startTarget();
  const accountId = 'ci-role-probe';
  // createAccount first: the others need the account.
  const order = [...used].sort((a, b) => Number(b === 'createAccount') - Number(a === 'createAccount'));
  const local = target.local;
  if (!local) throw new Error('the sandbox role is checked against a local stack');
  for (const name of order) await exercise(name, { store: local.storeAs('ciSuite') }, accountId);
  for (const { principal, action } of local.iam.allowed()) if (principal === 'ciSuite') derived.add(action);
});
afterAll(async () => {
  await target?.stop();
});

describe("the contract suite's own DynamoDB calls", () => {
  it('go through the admin functions only (no direct client use in the suite)', () => {
    expect(used).toEqual(
      expect.arrayContaining(['createAccount', 'createKey', 'getAccount', 'revokeKey', 'setAccountStatus']),
    );
    expect(source).not.toMatch(/target\.client\b/);
    expect(source).not.toMatch(/\.send\(\s*new \w+Command/);
  });

  it('are exactly the DynamoDB actions the sandbox role grants, item by item inside transactions', () => {
    expect(derived.size).toBeGreaterThan(2);
    expect([...derived].sort()).toEqual([...SANDBOX_SUITE_DYNAMODB_ACTIONS].sort());
  });
});

describe('the sandbox role', () => {
  const template = Template.fromStack(
    new CiBootstrapStack(new App({ context: { '@aws-cdk/core:enablePartitionLiterals': true } }), 'Ci', {
      repository: 'acme/hosted-model-api',
      env: { account: '123456789012', region: 'eu-west-1' },
    }),
  );
  const statements = Object.values(template.findResources('AWS::IAM::Policy')).flatMap(
    (p) =>
      (
        p as {
          Properties: { PolicyDocument: { Statement: { Action: string | string[]; Resource: unknown }[] } };
        }
      ).Properties.PolicyDocument.Statement,
  );
  const granted = (prefix: string) =>
    statements.flatMap((s) =>
      [s.Action]
        .flat()
        .filter((a) => a.startsWith(prefix))
        .map((a) => ({ a, r: s.Resource })),
    );

  it('grants those DynamoDB actions on the sandbox tables and their indexes only', () => {
    const dynamo = granted('dynamodb:');
    expect([...new Set(dynamo.map((g) => g.a))].sort()).toEqual([...derived].sort());
    const arn = (rest: string) =>
      `arn:aws:dynamodb:eu-west-1:123456789012:table/HostedModelApi-sandbox-${rest}`;
    const tables = ['keys', 'accounts', 'ledger', 'holds'];
    const expected = [
      ...tables.map((t) => arn(t)),
      arn('keys/index/byAccount'),
      arn('keys/index/byKeyId'),
    ].sort();
    // The suite's own audit entries (the operator's code writes each change with one): a Put on the
    // audit log alone.
    const audit = dynamo.filter(({ r }) => [r].flat().map(String).includes(arn('audit')));
    expect(audit.map(({ a, r }) => [a, [r].flat().map(String)])).toEqual([
      ['dynamodb:PutItem', [arn('audit')]],
    ]);
    for (const { r } of dynamo.filter((g) => !audit.includes(g)))
      expect([r].flat().map(String).sort()).toEqual(expected);
  });

  it('may assume only the CDK bootstrap roles a deploy uses, named exactly', () => {
    const roles = granted('sts:AssumeRole').flatMap((g) => [g.r].flat());
    expect(roles.sort()).toEqual([
      'arn:aws:iam::123456789012:role/cdk-hnb659fds-deploy-role-123456789012-eu-west-1',
      'arn:aws:iam::123456789012:role/cdk-hnb659fds-file-publishing-role-123456789012-eu-west-1',
    ]);
    for (const s of statements) expect(JSON.stringify(s.Resource)).not.toContain('cdk-*');
  });

  it('takes the bootstrap qualifier from the CDK context', () => {
    const app = new App({ context: { '@aws-cdk/core:bootstrapQualifier': 'custom123' } });
    const stack = new CiBootstrapStack(app, 'Ci', {
      repository: 'acme/hosted-model-api',
      env: { account: '123456789012', region: 'eu-west-1' },
    });
    expect(JSON.stringify(Template.fromStack(stack).toJSON())).toContain(
      'role/cdk-custom123-deploy-role-123456789012-eu-west-1',
    );
  });
});
