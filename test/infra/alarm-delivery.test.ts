import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { SERVICE_DIMENSIONS, SERVICE_NAMESPACE } from '../../lib/infra/alarms.js';
import { ApiStack } from '../../lib/infra/api-stack.js';
import { logicalIdOf, PROD_PROPS, type Resource, resources, synthStages } from './synth-offline.js';

/**
 * Alarms reach a person: the topic's own policy (which replaces SNS's default one) lets CloudWatch
 * publish every alarm's notification, and Budgets its own; the alarms on the paths that bill a
 * generation without the request (the logs subscription, the logged-usage function's asynchronous
 * queue, the usage record on a hold); and, in prod, AWS Backup's failed jobs reach the same topic.
 */
const stackOf = synthStages();

type Statement = {
  Sid?: string;
  Effect: string;
  Principal?: unknown;
  Action: string | string[];
  Resource: unknown;
  Condition?: Record<string, Record<string, unknown>>;
};
const topicPolicy = (stage: 'sandbox' | 'prod') => {
  const synth = stackOf(stage);
  const topic = logicalIdOf(synth, 'AWS::SNS::Topic', 'Alarms');
  const policies = Object.values(resources(synth.template)).filter((r) => r.Type === 'AWS::SNS::TopicPolicy');
  expect(policies).toHaveLength(1);
  expect(policies[0]?.Properties?.Topics).toEqual([{ Ref: topic }]);
  const document = policies[0]?.Properties?.PolicyDocument as { Statement: Statement[] } | undefined;
  const statements = document?.Statement ?? [];
  return { topic, statements };
};
const byService = (statements: Statement[], service: string) =>
  statements.filter((s) => JSON.stringify(s.Principal) === JSON.stringify({ Service: service }));

describe.each(['sandbox', 'prod'] as const)("the alarm topic's policy (%s)", (stage) => {
  it("lets CloudWatch publish, for this account's alarms in this region only", () => {
    const { topic, statements } = topicPolicy(stage);
    const cloudwatch = byService(statements, 'cloudwatch.amazonaws.com');
    expect(cloudwatch).toEqual([
      {
        Sid: 'CloudWatchAlarmsPublish',
        Effect: 'Allow',
        Principal: { Service: 'cloudwatch.amazonaws.com' },
        Action: 'SNS:Publish',
        Resource: { Ref: topic },
        Condition: {
          StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } },
          ArnLike: {
            'aws:SourceArn': {
              'Fn::Join': [
                '',
                [
                  'arn:',
                  { Ref: 'AWS::Partition' },
                  ':cloudwatch:',
                  { Ref: 'AWS::Region' },
                  ':',
                  { Ref: 'AWS::AccountId' },
                  ':alarm:*',
                ],
              ],
            },
          },
        },
      },
    ]);
  });

  it('lets Budgets publish exactly when a budget is set, and refuses publishing without TLS', () => {
    const { statements } = topicPolicy(stage);
    const budgets = byService(statements, 'budgets.amazonaws.com');
    // PROD_PROPS sets monthlyBudgetUsd; the sandbox has no budget.
    expect(budgets).toHaveLength(stage === 'prod' ? 1 : 0);
    if (stage === 'prod') expect(budgets[0]?.Condition?.StringEquals).toHaveProperty('aws:SourceAccount');
    expect(statements.filter((s) => s.Effect === 'Deny')).toEqual([
      expect.objectContaining({ Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
    ]);
  });

  it("sends every alarm to that topic, which CloudWatch's statement covers", () => {
    const synth = stackOf(stage);
    const topic = logicalIdOf(synth, 'AWS::SNS::Topic', 'Alarms');
    const alarms = Object.values(resources(synth.template)).filter(
      (r) => r.Type === 'AWS::CloudWatch::Alarm',
    );
    expect(alarms.length).toBeGreaterThan(20);
    for (const alarm of alarms) expect(alarm.Properties?.AlarmActions).toEqual([{ Ref: topic }]);
  });
});

describe.each(['sandbox', 'prod'] as const)('the alarms on billing without the request (%s)', (stage) => {
  const alarmOn = (metricName: string) => {
    const found = Object.entries(resources(stackOf(stage).template)).filter(
      ([, r]) => r.Type === 'AWS::CloudWatch::Alarm' && r.Properties?.MetricName === metricName,
    );
    expect(found, metricName).toHaveLength(1);
    return found[0]?.[1] as Resource;
  };

  it("watch CloudWatch Logs' delivery of the usage lines to the logged-usage function", () => {
    const synth = stackOf(stage);
    const logGroup = logicalIdOf(synth, 'AWS::Logs::LogGroup', 'CompletionsLogs');
    // The log group the subscription filter reads.
    synth.template.hasResourceProperties('AWS::Logs::SubscriptionFilter', {
      LogGroupName: { Ref: logGroup },
    });
    for (const metricName of ['DeliveryErrors', 'DeliveryThrottling'])
      expect(alarmOn(metricName).Properties).toMatchObject({
        Namespace: 'AWS/Logs',
        Dimensions: [{ Name: 'LogGroupName', Value: { Ref: logGroup } }],
        Statistic: 'Sum',
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      });
  });

  it("watch the logged-usage function's asynchronous queue: events dropped, and dead letters lost", () => {
    const synth = stackOf(stage);
    const fn = logicalIdOf(synth, 'AWS::Lambda::Function', 'LoggedUsageFunction');
    for (const metricName of ['AsyncEventsDropped', 'DeadLetterErrors'])
      expect(alarmOn(metricName).Properties).toMatchObject({
        Namespace: 'AWS/Lambda',
        Dimensions: [{ Name: 'FunctionName', Value: { Ref: fn } }],
        Statistic: 'Sum',
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      });
  });

  it('watch UsageRecordFailures exactly as BillingFailures: the same namespace and dimensions, 1 in a minute', () => {
    const billing = alarmOn('BillingFailures').Properties ?? {};
    const usageRecord = alarmOn('UsageRecordFailures').Properties ?? {};
    const shape = (p: Record<string, unknown>) => ({
      Namespace: p.Namespace,
      Dimensions: p.Dimensions,
      Statistic: p.Statistic,
      Period: p.Period,
      Threshold: p.Threshold,
      ComparisonOperator: p.ComparisonOperator,
    });
    expect(shape(usageRecord)).toEqual(shape(billing));
    expect(shape(usageRecord)).toEqual({
      Namespace: SERVICE_NAMESPACE,
      Dimensions: Object.entries(SERVICE_DIMENSIONS).map(([Name, Value]) => ({ Name, Value })),
      Statistic: 'Sum',
      Period: 60,
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
    });
  });
});

describe("AWS Backup's failed jobs", () => {
  const backupRule = (template: Template) =>
    Object.entries(template.findResources('AWS::Events::Rule')).filter(([, r]) =>
      JSON.stringify((r as Resource).Properties?.EventPattern ?? {}).includes('aws.backup'),
    ) as [string, Resource][];

  it("reach the alarm topic in prod: this vault's jobs that fail, abort or expire, published with a role of its own", () => {
    const prod = stackOf('prod');
    const topic = logicalIdOf(prod, 'AWS::SNS::Topic', 'Alarms');
    const vault = logicalIdOf(prod, 'AWS::Backup::BackupVault', 'BackupsVault');
    const rules = backupRule(prod.template);
    expect(rules).toHaveLength(1);
    const props = rules[0]?.[1].Properties as {
      EventPattern: unknown;
      Targets: { Arn: unknown; RoleArn: { 'Fn::GetAtt': [string, string] } }[];
    };
    expect(props.EventPattern).toEqual({
      source: ['aws.backup'],
      'detail-type': ['Backup Job State Change'],
      detail: {
        state: ['FAILED', 'ABORTED', 'EXPIRED'],
        backupVaultName: [{ 'Fn::GetAtt': [vault, 'BackupVaultName'] }],
      },
    });
    expect(props.Targets).toHaveLength(1);
    expect(props.Targets[0]?.Arn).toEqual({ Ref: topic });
    const role = props.Targets[0]?.RoleArn['Fn::GetAtt'][0] ?? '';
    prod.template.hasResourceProperties('AWS::IAM::Role', {
      AssumeRolePolicyDocument: {
        Statement: [Match.objectLike({ Principal: { Service: 'events.amazonaws.com' } })],
      },
    });
    prod.template.hasResourceProperties('AWS::IAM::Policy', {
      Roles: [{ Ref: role }],
      PolicyDocument: { Statement: [{ Action: 'sns:Publish', Effect: 'Allow', Resource: { Ref: topic } }] },
    });
  });

  it('are not watched in the sandbox, which has no backups', () => {
    expect(backupRule(stackOf('sandbox').template)).toEqual([]);
  });

  it('reach an existing topic (alarmTopicArn) through the same role, which needs no statement in that topic', () => {
    const arn = 'arn:aws:sns:us-east-1:123456789012:ops-alarms';
    const { alarmEmail: _, ...withoutEmail } = PROD_PROPS;
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const template = Template.fromStack(
      new ApiStack(app, 'ExistingTopic', { ...withoutEmail, alarmTopicArn: arn }),
    );
    // The stack writes no policy for a topic it does not own.
    template.resourceCountIs('AWS::SNS::Topic', 0);
    template.resourceCountIs('AWS::SNS::TopicPolicy', 0);
    const rules = backupRule(template);
    expect(rules).toHaveLength(1);
    const targets = (rules[0]?.[1].Properties?.Targets ?? []) as { Arn: unknown; RoleArn?: unknown }[];
    expect(targets).toEqual([{ Id: 'Target0', Arn: arn, RoleArn: expect.anything() }]);
    template.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: { Statement: [{ Action: 'sns:Publish', Effect: 'Allow', Resource: arn }] },
    });
  });
});
