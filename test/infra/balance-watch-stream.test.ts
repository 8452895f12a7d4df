import { beforeAll, describe, expect, it } from 'vitest';
import {
  WATCH_OUTBOX_INTERVAL_MINUTES,
  WATCH_SWEEP_INTERVAL_MINUTES,
} from '../../functions/balance-watch/schedule.js';
import { STREAM_FILTERS } from '../../functions/balance-watch/stream.js';
import { PROD_PROPS, type Resource, resources, type Synthesized, synthOffline } from './synth-offline.js';

/**
 * The balance watch as prod synthesizes it (a custom domain: the dashboard, so the watch): the
 * accounts table's stream with both images; the event source mapping from it to the watch with the
 * filters the code defines (STREAM_FILTERS), its batching and retries; the safety sweep and the outbox
 * on EventBridge Scheduler (no EventBridge rule left for it) with a role that may invoke the watch and
 * nothing else; the stream's four reads (ListStreams among them, which Lambda checks when the mapping is made) on the stream alone; the dashboard's grant to copy
 * the levels onto the account items; its "not running" and "behind" alarms. cdk-nag stays green.
 */
let prod: Synthesized;
let all: Record<string, Resource>;
beforeAll(() => {
  prod = synthOffline(PROD_PROPS);
  all = resources(prod.template);
}, 240_000);

const ofType = (type: string) => Object.entries(all).filter(([, r]) => r.Type === type);
const props = (r: Resource | undefined) => (r?.Properties ?? {}) as Record<string, unknown>;
const watchId = () => {
  const found = ofType('AWS::Lambda::Function').filter(([id]) => id.startsWith('BalanceWatchFunction'));
  expect(found).toHaveLength(1);
  return found[0]?.[0] as string;
};
const accountsId = () => {
  const found = ofType('AWS::DynamoDB::GlobalTable').filter(([id]) => id.includes('accounts'));
  expect(found).toHaveLength(1);
  return found[0]?.[0] as string;
};
const arnOf = (id: string) => ({ 'Fn::GetAtt': [id, 'Arn'] });
const statementsOf = (functionId: string) => {
  const role = (props(all[functionId]).Role as { 'Fn::GetAtt': [string] })['Fn::GetAtt'][0];
  return ofType('AWS::IAM::Policy')
    .filter(([, p]) => (props(p).Roles as { Ref: string }[]).some((r) => r.Ref === role))
    .flatMap(([, p]) => (props(p).PolicyDocument as { Statement: Record<string, unknown>[] }).Statement);
};
const actionsOf = (s: Record<string, unknown>) => [s.Action].flat() as string[];

describe('the balance watch on the accounts table’s stream', () => {
  it('has the accounts table stream both images, and the mapping the code’s filters', () => {
    expect(props(all[accountsId()]).StreamSpecification).toEqual({ StreamViewType: 'NEW_AND_OLD_IMAGES' });
    const mappings = ofType('AWS::Lambda::EventSourceMapping');
    expect(mappings).toHaveLength(1);
    const mapping = props(mappings[0]?.[1]);
    expect(mapping).toMatchObject({
      FunctionName: { Ref: watchId() },
      EventSourceArn: { 'Fn::GetAtt': [accountsId(), 'StreamArn'] },
      StartingPosition: 'TRIM_HORIZON',
      BatchSize: 100,
      MaximumBatchingWindowInSeconds: 5,
      MaximumRetryAttempts: 3,
      BisectBatchOnFunctionError: true,
      MaximumRecordAgeInSeconds: 3600,
    });
    const patterns = (mapping.FilterCriteria as { Filters: { Pattern: string }[] }).Filters.map((f) =>
      JSON.parse(f.Pattern),
    );
    expect(patterns).toEqual(STREAM_FILTERS);
    // Below a level: the margin's sign; only an item with levels copied onto it.
    expect(patterns[0]).toEqual({
      dynamodb: { NewImage: { watchNano: { N: [{ exists: true }] }, watchMargin: { N: [{ prefix: '-' }] } } },
    });
  });

  it('runs the sweep hourly and the outbox every few minutes on EventBridge Scheduler, no rule', () => {
    const fn = watchId();
    const schedules = ofType('AWS::Scheduler::Schedule').filter(
      ([, r]) => JSON.stringify((props(r).Target as { Arn: unknown }).Arn) === JSON.stringify(arnOf(fn)),
    );
    const byInput = Object.fromEntries(
      schedules.map(([, r]) => {
        const target = props(r).Target as { Input: string; RoleArn: unknown };
        return [JSON.parse(target.Input).run, props(r).ScheduleExpression];
      }),
    );
    expect(byInput).toEqual({
      sweep: `rate(${WATCH_SWEEP_INTERVAL_MINUTES} minutes)`,
      outbox: `rate(${WATCH_OUTBOX_INTERVAL_MINUTES} minutes)`,
    });
    const rules = ofType('AWS::Events::Rule').filter(([, r]) => JSON.stringify(props(r)).includes(fn));
    expect(rules).toEqual([]);
    // The schedules' role: invoke this function, nothing else.
    const target = props(schedules[0]?.[1]).Target as { RoleArn: { 'Fn::GetAtt': [string] } };
    const roleId = target.RoleArn['Fn::GetAtt'][0];
    const inline = (props(all[roleId]).Policies as { PolicyDocument: { Statement: unknown[] } }[]).flatMap(
      (p) => p.PolicyDocument.Statement,
    );
    expect(inline).toEqual([{ Action: 'lambda:InvokeFunction', Effect: 'Allow', Resource: arnOf(fn) }]);
  });

  it('grants the stream’s four reads on that stream alone, and the dashboard the copy on the accounts table', () => {
    const streamArn = { 'Fn::GetAtt': [accountsId(), 'StreamArn'] };
    const statements = statementsOf(watchId());
    const streamReads = statements.filter((s) =>
      actionsOf(s).some((a) => /^dynamodb:.*(Stream|Records|ShardIterator)/.test(a)),
    );
    expect(streamReads).toEqual([
      {
        Action: [
          'dynamodb:DescribeStream',
          'dynamodb:GetShardIterator',
          'dynamodb:GetRecords',
          'dynamodb:ListStreams',
        ],
        Effect: 'Allow',
        Resource: streamArn,
      },
    ]);
    const dashboard = ofType('AWS::Lambda::Function').find(([id]) => id.startsWith('DashboardFunction'))?.[0];
    const copy = statementsOf(String(dashboard)).filter(
      (s) => JSON.stringify(s.Resource) === JSON.stringify(arnOf(accountsId())),
    );
    expect(copy.flatMap(actionsOf)).toEqual(
      expect.arrayContaining(['dynamodb:GetItem', 'dynamodb:UpdateItem']),
    );
  });

  it('alarms when its schedules stop and when it falls behind the stream', () => {
    const alarms = ofType('AWS::CloudWatch::Alarm').map(([id, r]) => [id, props(r)] as const);
    const alarm = (prefix: string) => alarms.find(([id]) => id.startsWith(prefix))?.[1];
    expect(alarm('BalanceWatchStopped')).toMatchObject({
      MetricName: 'BalanceWatchRuns',
      Period: 3 * WATCH_OUTBOX_INTERVAL_MINUTES * 60,
      ComparisonOperator: 'LessThanThreshold',
      TreatMissingData: 'breaching',
    });
    expect(alarm('BalanceWatchSweepStopped')).toMatchObject({
      MetricName: 'BalanceWatchSweeps',
      Period: 2 * WATCH_SWEEP_INTERVAL_MINUTES * 60,
      ComparisonOperator: 'LessThanThreshold',
      TreatMissingData: 'breaching',
    });
    expect(alarm('BalanceWatchStreamBehind')).toMatchObject({
      MetricName: 'IteratorAge',
      Namespace: 'AWS/Lambda',
      Statistic: 'Maximum',
      Threshold: 600_000,
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: watchId() } }],
    });
  });

  it('keeps cdk-nag green', () => {
    expect(prod.nag?.conclusion).toBe('success');
    expect(prod.nag?.violations).toEqual([]);
  });
});
