import { Match } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { logicalIdOf, type Resource, resources, type Synthesized, synthStages } from './synth-offline.js';

/**
 * The completions log's usage lines reach the logged-usage function: a subscription filter on that
 * log group, matching only `{ $.message = "generation usage" }`, whose destination is the function,
 * which CloudWatch Logs may invoke (for that log group only); the function may read the ledger and
 * write the settlement, and its failed deliveries land in an alarmed queue.
 */
const stackOf = synthStages();

const ofType = (synth: Synthesized, type: string): [string, Resource][] =>
  Object.entries(resources(synth.template)).filter(([, r]) => r.Type === type);

describe.each(['sandbox', 'prod'] as const)('the usage-line subscription (%s)', (stage) => {
  it('is on the completions log group, matches only usage lines, and delivers them to the logged-usage function', () => {
    const synth = stackOf(stage);
    const completionsLogs = logicalIdOf(synth, 'AWS::Logs::LogGroup', 'CompletionsLogs');
    const fn = logicalIdOf(synth, 'AWS::Lambda::Function', 'LoggedUsageFunction');
    const filters = ofType(synth, 'AWS::Logs::SubscriptionFilter');
    expect(filters).toHaveLength(1);
    expect(filters[0]?.[1].Properties).toEqual({
      LogGroupName: { Ref: completionsLogs },
      FilterPattern: '{ $.message = "generation usage" }',
      DestinationArn: { 'Fn::GetAtt': [fn, 'Arn'] },
    });
    // The metric filters read the same lines with the same pattern.
    for (const [, metricFilter] of ofType(synth, 'AWS::Logs::MetricFilter'))
      expect(metricFilter.Properties?.FilterPattern).toBe(filters[0]?.[1].Properties?.FilterPattern);
  });

  it('lets CloudWatch Logs invoke the function for that log group, before the filter is created', () => {
    const synth = stackOf(stage);
    const fn = logicalIdOf(synth, 'AWS::Lambda::Function', 'LoggedUsageFunction');
    const completionsLogs = logicalIdOf(synth, 'AWS::Logs::LogGroup', 'CompletionsLogs');
    const permissions = ofType(synth, 'AWS::Lambda::Permission').filter(
      ([, r]) => r.Properties?.Principal === 'logs.amazonaws.com',
    );
    expect(permissions).toHaveLength(1);
    expect(permissions[0]?.[1].Properties).toMatchObject({
      Action: 'lambda:InvokeFunction',
      FunctionName: { 'Fn::GetAtt': [fn, 'Arn'] },
      SourceArn: { 'Fn::GetAtt': [completionsLogs, 'Arn'] },
    });
    const [filterId] = ofType(synth, 'AWS::Logs::SubscriptionFilter')[0] ?? [];
    const filter = resources(synth.template)[filterId ?? ''] as Resource & { DependsOn?: string[] };
    expect(filter.DependsOn).toContain(permissions[0]?.[0]);
  });

  it('gives the function the ledger read and the settlement transaction, nothing more, and an alarmed dead-letter queue', () => {
    const synth = stackOf(stage);
    const fn = logicalIdOf(synth, 'AWS::Lambda::Function', 'LoggedUsageFunction');
    const queue = logicalIdOf(synth, 'AWS::SQS::Queue', 'LoggedUsageFailures');
    const props = resources(synth.template)[fn]?.Properties ?? {};
    expect(props).toMatchObject({ DeadLetterConfig: { TargetArn: { 'Fn::GetAtt': [queue, 'Arn'] } } });
    // Not capped: a capped one would be throttled behind a burst of batches.
    expect(props.ReservedConcurrentExecutions).toBeUndefined();
    const role = (props.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
    const statements = ofType(synth, 'AWS::IAM::Policy')
      .filter(([, r]) => JSON.stringify(r.Properties?.Roles).includes(role))
      .flatMap(
        ([, r]) =>
          (
            r.Properties?.PolicyDocument as
              | { Statement?: { Action: string | string[]; Resource: unknown }[] }
              | undefined
          )?.Statement ?? [],
      );
    const byTable = (table: string) =>
      statements
        .filter((s) =>
          JSON.stringify(s.Resource).includes(logicalIdOf(synth, 'AWS::DynamoDB::GlobalTable', table)),
        )
        .flatMap((s) => [s.Action].flat())
        .sort();
    expect(byTable('Tablesledger')).toEqual(['dynamodb:BatchGetItem', 'dynamodb:PutItem']);
    expect(byTable('Tablesaccounts')).toEqual(['dynamodb:UpdateItem']);
    expect(byTable('Tablesholds')).toEqual(['dynamodb:DeleteItem']);
    expect(byTable('Tableskeys')).toEqual([]);
    synth.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [queue, 'QueueName'] } }],
    });
    for (const metricName of ['LoggedGenerationsBilled', 'LoggedUsageUnreadable'])
      synth.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'HostedModelApi',
        MetricName: metricName,
        Threshold: 1,
        AlarmActions: Match.anyValue(),
      });
  });

  it('passes cdk-nag', () => {
    expect(stackOf(stage).nag?.violations).toEqual([]);
  });
});
