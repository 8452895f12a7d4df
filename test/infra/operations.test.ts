import { readFileSync } from 'node:fs';
import { App } from 'aws-cdk-lib';
import { Match } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { BALANCE_CHECK_INTERVAL_MINUTES } from '../../functions/sweeper/schedule.js';
import { ApiStack } from '../../lib/infra/api-stack.js';
import { logicalIdOf, PROD_PROPS, resources, synthStages } from './synth-offline.js';

/**
 * What keeps the stack operable: the budget's permission to publish, the upstream secret as `{}`, the
 * sweeper's failure destination and schedules, tags on every resource, and the prod backup plan.
 */
const stackOf = synthStages();

describe('cdk-nag AwsSolutions, with the new resources', () => {
  it.each(['sandbox', 'prod'] as const)('reports nothing unacknowledged for %s', (stage) => {
    const { nag } = stackOf(stage);
    expect(nag?.violations).toEqual([]);
    expect(nag?.conclusion).toBe('success');
  });
});

describe('the budget', () => {
  it("may publish to the alarm topic, scoped to this account's budgets (AWS's documented policy)", () => {
    const prod = stackOf('prod');
    const topic = logicalIdOf(prod, 'AWS::SNS::Topic', 'Alarms');
    prod.template.hasResourceProperties('AWS::SNS::TopicPolicy', {
      Topics: [{ Ref: topic }],
      PolicyDocument: {
        Statement: Match.arrayWith([
          {
            Sid: 'AWSBudgetsPublish',
            Effect: 'Allow',
            Principal: { Service: 'budgets.amazonaws.com' },
            Action: 'SNS:Publish',
            Resource: { Ref: topic },
            Condition: {
              StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } },
              ArnLike: {
                'aws:SourceArn': {
                  'Fn::Join': [
                    '',
                    ['arn:', { Ref: 'AWS::Partition' }, ':budgets::', { Ref: 'AWS::AccountId' }, ':*'],
                  ],
                },
              },
            },
          },
        ]),
      },
    });
    prod.template.hasResourceProperties('AWS::Budgets::Budget', {
      NotificationsWithSubscribers: [{ Subscribers: [{ SubscriptionType: 'SNS', Address: { Ref: topic } }] }],
    });
  });

  it('is required in prod, with a message that says how', () => {
    const { monthlyBudgetUsd: _, ...withoutBudget } = PROD_PROPS;
    expect(() => new ApiStack(new App(), 'NoBudget', withoutBudget)).toThrow(/-c monthlyBudgetUsd=<USD>/);
  });
});

describe('the upstream-credentials secret', () => {
  it.each(['sandbox', 'prod'] as const)(
    'is created as {} in %s (a JSON object with no credential yet)',
    (stage) => {
      const { template } = stackOf(stage);
      template.hasResourceProperties('AWS::SecretsManager::Secret', {
        Description: Match.stringLikeRegexp('^Upstream provider API keys'),
        SecretString: '{}',
        GenerateSecretString: Match.absent(),
      });
    },
  );
});

describe('the hold sweeper', () => {
  it.each(['sandbox', 'prod'] as const)(
    'reserves no concurrency unless asked, and sends failed scheduled invocations to a queue with an alarm (%s)',
    (stage) => {
      const synth = stackOf(stage);
      const queue = logicalIdOf(synth, 'AWS::SQS::Queue', 'HoldSweeperFailures');
      const sweeper = logicalIdOf(synth, 'AWS::Lambda::Function', 'HoldSweeper');
      expect(resources(synth.template)[sweeper]?.Properties).toMatchObject({
        DeadLetterConfig: { TargetArn: { 'Fn::GetAtt': [queue, 'Arn'] } },
      });
      // A reservation of 1 fails a deploy on an account without unreserved concurrency to spare
      // (test/infra/new-account.test.ts: -c reserveSweeper=true asks for it).
      expect(resources(synth.template)[sweeper]?.Properties?.ReservedConcurrentExecutions).toBeUndefined();
      synth.template.hasResourceProperties('AWS::SQS::Queue', { SqsManagedSseEnabled: true });
      synth.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'AWS/SQS',
        MetricName: 'ApproximateNumberOfMessagesVisible',
        Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [queue, 'QueueName'] } }],
        Threshold: 1,
        AlarmActions: [{ Ref: logicalIdOf(synth, 'AWS::SNS::Topic', 'Alarms') }],
      });
      // Its role may send to that queue (Lambda sends the failed event with the function's role).
      synth.template.hasResourceProperties('AWS::IAM::Policy', {
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({ Action: 'sqs:SendMessage', Resource: { 'Fn::GetAtt': [queue, 'Arn'] } }),
          ]),
        },
      });
    },
  );
});

describe("the sweeper's schedules", () => {
  it.each(['sandbox', 'prod'] as const)(
    'keep no event for EventBridge to retry past two minutes (the sweep) or one interval (the balance check) (%s)',
    (stage) => {
      const synth = stackOf(stage);
      const sweeper = logicalIdOf(synth, 'AWS::Lambda::Function', 'HoldSweeper');
      const targets = (id: string) =>
        resources(synth.template)[logicalIdOf(synth, 'AWS::Events::Rule', id)]?.Properties?.Targets as {
          Arn: unknown;
          RetryPolicy: unknown;
        }[];
      const expected = (seconds: number) => [
        expect.objectContaining({
          Arn: { 'Fn::GetAtt': [sweeper, 'Arn'] },
          RetryPolicy: { MaximumEventAgeInSeconds: seconds, MaximumRetryAttempts: 0 },
        }),
      ];
      expect(targets('HoldSweep')).toEqual(expected(2 * 60));
      expect(targets('BalanceCheck')).toEqual(expected(BALANCE_CHECK_INTERVAL_MINUTES * 60));
    },
  );

  it.each(['sandbox', 'prod'] as const)(
    "keep no throttled sweep in Lambda's asynchronous queue past two minutes (not its 6-hour default) (%s)",
    (stage) => {
      const synth = stackOf(stage);
      const sweeper = logicalIdOf(synth, 'AWS::Lambda::Function', 'HoldSweeper');
      synth.template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
        FunctionName: { Ref: sweeper },
        MaximumEventAgeInSeconds: 120,
      });
    },
  );
});

describe('tags', () => {
  const tagsOf = (r: { Type: string; Properties?: Record<string, unknown> }) => {
    const props = r.Properties ?? {};
    // A TableV2 carries its tags on its replica.
    const raw =
      r.Type === 'AWS::DynamoDB::GlobalTable'
        ? (props.Replicas as { Tags?: unknown }[])?.[0]?.Tags
        : props.Tags;
    if (Array.isArray(raw))
      return Object.fromEntries(raw.map((t: { Key: string; Value: string }) => [t.Key, t.Value]));
    return raw as Record<string, string> | undefined;
  };

  it.each(['sandbox', 'prod'] as const)(
    'name the service and the stage on every taggable resource (%s)',
    (stage) => {
      // Except the CDK's own S3 auto-delete provider (sandbox only): a raw CfnResource that the Tags
      // aspect cannot reach.
      const all = Object.entries(resources(stackOf(stage).template))
        .filter(([id]) => !id.startsWith('CustomS3AutoDeleteObjectsCustomResourceProvider'))
        .map(([, r]) => r);
      for (const type of [
        'AWS::Lambda::Function',
        'AWS::DynamoDB::GlobalTable',
        'AWS::SQS::Queue',
        'AWS::SecretsManager::Secret',
        'AWS::S3::Bucket',
        'AWS::CloudFront::Distribution',
        'AWS::IAM::Role',
        'AWS::Logs::LogGroup',
      ]) {
        const ofType = all.filter((r) => r.Type === type);
        expect(ofType.length, type).toBeGreaterThan(0);
        for (const r of ofType) expect(tagsOf(r), type).toMatchObject({ service: 'hosted-model-api', stage });
      }
      for (const r of all) {
        const tags = tagsOf(r);
        if (tags !== undefined) expect(tags, r.Type).toMatchObject({ service: 'hosted-model-api', stage });
      }
    },
  );
});

/** The tables backed up in prod, by their logical id's prefix. */
const BACKED_UP = ['Tablesaccounts', 'Tablesledger', 'Tablesteam', 'Tablesaudit'];

describe('backups', () => {
  it('back up the accounts, ledger, team and audit tables daily in prod, into a retained vault, with a role of their own', () => {
    const prod = stackOf('prod');
    const [accounts, ledger, team, audit] = BACKED_UP.map((id) =>
      logicalIdOf(prod, 'AWS::DynamoDB::GlobalTable', id),
    );
    prod.template.hasResourceProperties('AWS::Backup::BackupPlan', {
      BackupPlan: {
        BackupPlanRule: [
          Match.objectLike({ ScheduleExpression: 'cron(0 5 * * ? *)', Lifecycle: { DeleteAfterDays: 35 } }),
        ],
      },
    });
    prod.template.hasResource('AWS::Backup::BackupVault', { DeletionPolicy: 'Retain' });
    const selections = prod.template.findResources('AWS::Backup::BackupSelection');
    expect(Object.keys(selections)).toHaveLength(1);
    const selection = (
      Object.values(selections)[0] as { Properties: { BackupSelection: { Resources: unknown[] } } }
    ).Properties.BackupSelection;
    expect(selection.Resources).toEqual([
      { 'Fn::GetAtt': [accounts, 'Arn'] },
      { 'Fn::GetAtt': [ledger, 'Arn'] },
      { 'Fn::GetAtt': [team, 'Arn'] },
      { 'Fn::GetAtt': [audit, 'Arn'] },
    ]);
    // No managed policy: the role reaches only these tables and the vault.
    const role = logicalIdOf(prod, 'AWS::IAM::Role', 'BackupsRole');
    expect(resources(prod.template)[role]?.Properties?.ManagedPolicyArns).toBeUndefined();
  });

  it("give the backup role the DynamoDB statements of AWS's AWSBackupServiceRolePolicyForBackup, on these tables and their backups only", () => {
    const prod = stackOf('prod');
    const role = logicalIdOf(prod, 'AWS::IAM::Role', 'BackupsRole');
    const tables = BACKED_UP.map((id) => logicalIdOf(prod, 'AWS::DynamoDB::GlobalTable', id));
    const statements = Object.values(resources(prod.template))
      .filter((r) => r.Type === 'AWS::IAM::Policy' && JSON.stringify(r.Properties?.Roles).includes(role))
      .flatMap(
        (r) =>
          (
            r.Properties?.PolicyDocument as
              | { Statement: { Action: string | string[]; Resource: unknown }[] }
              | undefined
          )?.Statement ?? [],
      );
    const grants = (resource: unknown) =>
      statements
        .filter((s) => [s.Resource].flat().some((r) => JSON.stringify(r) === JSON.stringify(resource)))
        .flatMap((s) => [s.Action].flat())
        .sort();
    // The managed policy's DynamoDB statements (DynamoDBPermissions, DynamodbBackupPermissions on
    // table/*; DynamoDBBackupResourcePermissions on table/*/backup/*), narrowed to each table.
    for (const table of tables) {
      expect(grants({ 'Fn::GetAtt': [table, 'Arn'] })).toEqual([
        'dynamodb:CreateBackup',
        'dynamodb:DescribeTable',
        'dynamodb:ListTagsOfResource',
        'dynamodb:StartAwsBackupJob',
      ]);
      expect(grants({ 'Fn::Join': ['', [{ 'Fn::GetAtt': [table, 'Arn'] }, '/backup/*']] })).toEqual([
        'dynamodb:DeleteBackup',
        'dynamodb:DescribeBackup',
      ]);
    }
    const everything = statements.flatMap((s) => [s.Action].flat());
    // Those six actions and no other DynamoDB action; besides them, the vault statement only.
    expect(new Set(everything.filter((a) => a.startsWith('dynamodb:'))).size).toBe(6);
    expect(everything.filter((a) => !a.startsWith('dynamodb:')).sort()).toEqual([
      'backup:CopyIntoBackupVault',
      'backup:DescribeBackupVault',
    ]);
    expect(JSON.stringify(statements)).not.toContain('"*"');
  });

  it('have a restore runbook that pauses every function writing a table, and every schedule invoking one', () => {
    const prod = stackOf('prod');
    const all = resources(prod.template);
    const ref = (value: unknown) =>
      (value as { Ref?: string; 'Fn::GetAtt'?: [string, string] })?.Ref ??
      (value as { 'Fn::GetAtt'?: [string, string] })?.['Fn::GetAtt']?.[0];
    const WRITES = ['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem'].map((a) => `dynamodb:${a}`);
    const writerRoles = new Set(
      Object.values(all)
        .filter((r) => r.Type === 'AWS::IAM::Policy')
        .filter((r) =>
          (
            r.Properties?.PolicyDocument as { Statement?: { Action: string | string[] }[] } | undefined
          )?.Statement?.some((st) => [st.Action].flat().some((a) => WRITES.includes(a))),
        )
        .flatMap((r) => ((r.Properties?.Roles as unknown[] | undefined) ?? []).map(ref)),
    );
    const writers = Object.entries(all)
      .filter(([, r]) => r.Type === 'AWS::Lambda::Function' && writerRoles.has(ref(r.Properties?.Role)))
      .map(([id]) => id);
    const schedules = Object.entries(all)
      .filter(
        ([, r]) =>
          (r.Type === 'AWS::Events::Rule' &&
            ((r.Properties?.Targets as { Arn: unknown }[] | undefined) ?? []).some((t) =>
              writers.includes(ref(t.Arn) ?? ''),
            )) ||
          // EventBridge Scheduler's (the payments reconciler's): one target each.
          (r.Type === 'AWS::Scheduler::Schedule' &&
            writers.includes(ref((r.Properties?.Target as { Arn: unknown } | undefined)?.Arn) ?? '')),
      )
      .map(([id]) => id);
    const name = (id: string) => id.replace(/[0-9A-F]{8}$/, '');
    // Prod has a custom domain, so the dashboard, which makes accounts and keys.
    expect(writers.map(name).sort()).toEqual([
      'BalanceWatchFunction',
      'CompletionsFunction',
      'DashboardFunction',
      'HoldSweeperFunction',
      'LoggedUsageFunction',
      'PaymentsFunction',
      'PaymentsReconcilerFunction',
      'SignUpGuardFunction',
    ]);
    expect(schedules.map(name).sort()).toEqual([
      'BalanceCheck',
      'BalanceWatchSchedule',
      'HoldSweep',
      'PaymentsReconcilerSchedule',
    ]);
    const deploy = readFileSync(new URL('../../docs/deploy.md', import.meta.url), 'utf8');
    const runbook = deploy.slice(deploy.indexOf('## Restoring a table'));
    const stop = runbook.slice(runbook.indexOf('1. Stop every writer'), runbook.indexOf('\n2. '));
    for (const id of [...writers, ...schedules]) expect(stop, name(id)).toContain(`\`${name(id)}…\``);
    // Concurrency 0 for the functions, the schedules disabled; both undone after the restore.
    expect(stop).toMatch(/put-function-concurrency[\s\S]*--reserved-concurrent-executions 0/);
    expect(stop).toMatch(/disable-rule/);
    expect(runbook).toMatch(/enable-rule/);
    expect(stop).toMatch(/scheduler update-schedule[\s\S]*--state DISABLED/);
    expect(runbook).toMatch(/--state ENABLED/);
    expect(runbook).toMatch(/delete-function-concurrency/);
  });

  it('are not made for the disposable sandbox', () => {
    stackOf('sandbox').template.resourceCountIs('AWS::Backup::BackupPlan', 0);
  });
});
