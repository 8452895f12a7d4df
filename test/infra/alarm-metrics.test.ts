import { afterAll, describe, expect, it, vi } from 'vitest';
import { DYNAMODB_OPERATIONS, SERVICE_DIMENSIONS, SERVICE_NAMESPACE } from '../../lib/infra/alarms.js';
import { type Resource, resources, type Synthesized, synthStages } from './synth-offline.js';

/**
 * Every alarm reads a metric that exists: an AWS namespace's metric with a dimension set AWS
 * publishes it with (an alarm on any other set never leaves OK, for want of data), or a metric the
 * service itself emits, with the dimensions it emits. Both stages, every alarm, every metric of a
 * math expression.
 */

/**
 * The metrics AWS publishes, by namespace, with each dimension set (sorted names) it publishes them
 * with. Sources:
 * - AWS/Lambda: https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html (function
 *   metrics by FunctionName; ConcurrentExecutions also by FunctionName; the asynchronous invocation
 *   metrics AsyncEventsDropped and DeadLetterErrors by FunctionName too) and
 *   https://docs.aws.amazon.com/lambda/latest/dg/urls-monitoring.html (Function URL metrics by FunctionName).
 * - AWS/DynamoDB: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/metrics-dimensions.html
 *   (Read/WriteThrottleEvents by TableName, and by TableName and GlobalSecondaryIndexName for an index;
 *   SystemErrors and ThrottledRequests by TableName and Operation only).
 * - AWS/SQS: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-available-cloudwatch-metrics.html
 *   (by QueueName).
 * - AWS/Logs: https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/CloudWatch-Logs-Monitoring-CloudWatch-Metrics.html
 *   (a subscription's DeliveryErrors and DeliveryThrottling: "Valid Dimensions: LogGroupName,
 *   DestinationType, FilterName"; the page does not list the combinations, so both the log group alone
 *   and the three together are taken here).
 * - AWS/CloudFront: https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/programming-cloudwatch-metrics.html
 *   (by DistributionId and Region, Region always "Global").
 * - AWS/WAFV2: https://docs.aws.amazon.com/waf/latest/developerguide/waf-metrics.html (a CloudFront web
 *   ACL's metrics by WebACL and Rule, no Region; a managed rule group's by WebACL, ManagedRuleGroup and Rule... only the first is listed here).
 * - AWS/SES: https://docs.aws.amazon.com/ses/latest/dg/reputation-dashboard-cloudwatch-alarm.html
 *   (the account's Reputation.BounceRate and Reputation.ComplaintRate, without dimensions).
 * AWS Budgets publishes no CloudWatch metric here: its notification goes to the alarm topic, whose
 * policy test/infra/operations.test.ts checks against
 * https://docs.aws.amazon.com/cost-management/latest/userguide/budgets-sns-policy.html.
 */
const FUNCTION = [['FunctionName']];
const TABLE_OR_INDEX = [['TableName'], ['GlobalSecondaryIndexName', 'TableName']];
const PER_OPERATION = [['Operation', 'TableName']];
const DISTRIBUTION = [['DistributionId', 'Region']];
const WEB_ACL = [['Rule', 'WebACL']];
const SUBSCRIPTION = [['LogGroupName'], ['DestinationType', 'FilterName', 'LogGroupName']];
const PUBLISHED: Record<string, Record<string, string[][]>> = {
  'AWS/Lambda': {
    Errors: FUNCTION,
    Throttles: FUNCTION,
    Invocations: FUNCTION,
    Duration: FUNCTION,
    ConcurrentExecutions: FUNCTION,
    UrlRequestCount: FUNCTION,
    Url4xxCount: FUNCTION,
    Url5xxCount: FUNCTION,
    UrlRequestLatency: FUNCTION,
    AsyncEventsDropped: FUNCTION,
    DeadLetterErrors: FUNCTION,
    // A stream's event source mapping (the balance watch's).
    IteratorAge: FUNCTION,
  },
  'AWS/DynamoDB': {
    ReadThrottleEvents: TABLE_OR_INDEX,
    WriteThrottleEvents: TABLE_OR_INDEX,
    SystemErrors: PER_OPERATION,
    ThrottledRequests: PER_OPERATION,
    SuccessfulRequestLatency: PER_OPERATION,
  },
  'AWS/SQS': { ApproximateNumberOfMessagesVisible: [['QueueName']], NumberOfMessagesSent: [['QueueName']] },
  'AWS/Logs': { DeliveryErrors: SUBSCRIPTION, DeliveryThrottling: SUBSCRIPTION },
  'AWS/CloudFront': {
    Requests: DISTRIBUTION,
    '4xxErrorRate': DISTRIBUTION,
    '5xxErrorRate': DISTRIBUTION,
    TotalErrorRate: DISTRIBUTION,
  },
  'AWS/WAFV2': { AllowedRequests: WEB_ACL, BlockedRequests: WEB_ACL, CountedRequests: WEB_ACL },
  'AWS/SES': { 'Reputation.BounceRate': [[]], 'Reputation.ComplaintRate': [[]] },
};
/** The resource a dimension's value must name. */
const DIMENSION_RESOURCE: Record<string, string> = {
  FunctionName: 'AWS::Lambda::Function',
  TableName: 'AWS::DynamoDB::GlobalTable',
  QueueName: 'AWS::SQS::Queue',
  DistributionId: 'AWS::CloudFront::Distribution',
  LogGroupName: 'AWS::Logs::LogGroup',
};

interface Read {
  alarm: string;
  namespace: string;
  metricName: string;
  dimensions: Record<string, unknown>;
}
type Dimension = { Name: string; Value: unknown };

/** Every metric each alarm reads, a math expression's included. */
function alarmMetrics(synth: Synthesized): Read[] {
  const reads: Read[] = [];
  for (const [alarm, r] of Object.entries(resources(synth.template))) {
    if (r.Type !== 'AWS::CloudWatch::Alarm') continue;
    const p = r.Properties as {
      Namespace?: string;
      MetricName?: string;
      Dimensions?: Dimension[];
      Metrics?: {
        MetricStat?: { Metric: { Namespace: string; MetricName: string; Dimensions?: Dimension[] } };
      }[];
    };
    const dims = (list: Dimension[] | undefined) =>
      Object.fromEntries((list ?? []).map((d) => [d.Name, d.Value]));
    if (p.MetricName && p.Namespace)
      reads.push({ alarm, namespace: p.Namespace, metricName: p.MetricName, dimensions: dims(p.Dimensions) });
    for (const m of p.Metrics ?? []) {
      const metric = m.MetricStat?.Metric;
      if (metric)
        reads.push({
          alarm,
          namespace: metric.Namespace,
          metricName: metric.MetricName,
          dimensions: dims(metric.Dimensions),
        });
    }
  }
  return reads;
}

/**
 * The DynamoDB operation (the SystemErrors metric's Operation dimension) an IAM action is used by.
 * ConditionCheckItem is no operation of its own: it is the permission a TransactWriteItems needs for a
 * ConditionCheck item (DynamoDB developer guide, "Using IAM with DynamoDB transactions"), so its errors
 * are TransactWriteItems'.
 */
const operationOf = (action: string) => (action === 'ConditionCheckItem' ? 'TransactWriteItems' : action);

/** The logical id a dimension's value refers to ({Ref} or {Fn::GetAtt}). */
function referenced(value: unknown): string | undefined {
  const v = value as { Ref?: string; 'Fn::GetAtt'?: [string, string] };
  return v?.Ref ?? v?.['Fn::GetAtt']?.[0];
}

/** Arguments for each metric-recording function of functions/shared/observability.ts. */
const RECORD_ARGUMENTS: Record<string, unknown[]> = {
  recordBillingFailure: [{}, new Error('a test failure')],
  recordUsageRecordFailure: ['gen-1-test', new Error('a test failure')],
  recordUsageOutOfBounds: [{}],
  recordExpiredHoldReleased: [],
  recordSweep: [],
  recordNegativeBalances: [1],
  recordOriginRefused: [],
  recordSettlementContention: [{ conflicts: 1, retries: 1 }],
  recordSettlementDeferred: ['gen-1-test', new Error('a test failure')],
  recordDeferredSettlementCompleted: [],
  recordLoggedUsage: [{ billed: 1, unreadable: 1 }],
  recordEmailsDeadLettered: [1],
  recordWatchRun: ['sweep'],
};

/** What the service's code emits as EMF, run with the deployed function's settings. */
async function emitted(
  synth: Synthesized,
): Promise<{ namespace: string; metricName: string; dimensions: Record<string, string> }[]> {
  const fn = Object.values(resources(synth.template)).find(
    (r) =>
      r.Type === 'AWS::Lambda::Function' &&
      (r.Properties?.Environment as { Variables?: Record<string, string> })?.Variables
        ?.POWERTOOLS_SERVICE_NAME,
  ) as Resource;
  const variables =
    (fn.Properties?.Environment as { Variables: Record<string, string> } | undefined)?.Variables ?? {};
  vi.resetModules();
  vi.stubEnv('POWERTOOLS_METRICS_DISABLED', 'false');
  vi.stubEnv('POWERTOOLS_SERVICE_NAME', variables.POWERTOOLS_SERVICE_NAME ?? '');
  vi.stubEnv('POWERTOOLS_METRICS_NAMESPACE', variables.POWERTOOLS_METRICS_NAMESPACE ?? '');
  const lines: string[] = [];
  const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: unknown) => {
    lines.push(String(chunk));
    return true;
  });
  const log = vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => {
    lines.push(args.map(String).join(' '));
  });
  try {
    const observability = (await import('../../functions/shared/observability.js')) as Record<
      string,
      unknown
    >;
    // Every record* function, each emitting its one metric (a new one needs its arguments here).
    for (const [name, fn] of Object.entries(observability)) {
      if (!name.startsWith('record') || typeof fn !== 'function') continue;
      const args = RECORD_ARGUMENTS[name];
      if (!args) throw new Error(`give ${name} its arguments in RECORD_ARGUMENTS`);
      (fn as (...a: unknown[]) => void)(...args);
    }
    // And the payments webhook's, recorded by its own module (functions/payments/metrics.ts).
    const payments = await import('../../functions/payments/metrics.js');
    for (const metric of Object.keys(payments.PAYMENT_METRICS) as (keyof typeof payments.PAYMENT_METRICS)[])
      payments.recordPayment(metric, 'a test event', {});
  } finally {
    write.mockRestore();
    log.mockRestore();
    vi.unstubAllEnvs();
    vi.resetModules();
  }
  const out: { namespace: string; metricName: string; dimensions: Record<string, string> }[] = [];
  for (const line of lines.join('\n').split('\n')) {
    if (!line.includes('"_aws"')) continue;
    const emf = JSON.parse(line) as Record<string, unknown> & {
      _aws: {
        CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string }[] }[];
      };
    };
    for (const directive of emf._aws.CloudWatchMetrics)
      for (const set of directive.Dimensions)
        for (const metric of directive.Metrics)
          out.push({
            namespace: directive.Namespace,
            metricName: metric.Name,
            dimensions: Object.fromEntries(set.map((d) => [d, String(emf[d])])),
          });
  }
  return out;
}

const stackOf = synthStages();
afterAll(() => vi.restoreAllMocks());

describe.each(['sandbox', 'prod'] as const)('every alarm in %s', (stage) => {
  const synth = () => stackOf(stage);

  it('reads an AWS metric with a dimension set AWS publishes it with, naming a resource of the stack', () => {
    const reads = alarmMetrics(synth()).filter((r) => r.namespace.startsWith('AWS/'));
    expect(reads.length).toBeGreaterThan(10);
    const all = resources(synth().template);
    for (const read of reads) {
      const sets = PUBLISHED[read.namespace]?.[read.metricName];
      expect(sets, `${read.alarm}: ${read.namespace} ${read.metricName}`).toBeDefined();
      const names = Object.keys(read.dimensions).sort();
      expect(sets, `${read.alarm}: ${read.metricName} by ${names.join(',')}`).toContainEqual(names);
      for (const [name, value] of Object.entries(read.dimensions)) {
        const type = DIMENSION_RESOURCE[name];
        if (type) expect(all[referenced(value) ?? '']?.Type, `${read.alarm}: ${name}`).toBe(type);
      }
      if (read.namespace === 'AWS/CloudFront') expect(read.dimensions.Region).toBe('Global');
    }
  });

  it("reads the service's own metrics as the code emits them (EMF) or the log filters publish them", async () => {
    const emf = await emitted(synth());
    expect(emf.length).toBeGreaterThan(3);
    for (const e of emf)
      expect(e).toMatchObject({ namespace: SERVICE_NAMESPACE, dimensions: SERVICE_DIMENSIONS });
    const filters = Object.values(resources(synth().template))
      .filter((r) => r.Type === 'AWS::Logs::MetricFilter')
      .flatMap(
        (r) =>
          (r.Properties?.MetricTransformations as {
            MetricNamespace: string;
            MetricName: string;
            Dimensions?: { Key: string }[];
          }[]) ?? [],
      );
    const own = alarmMetrics(synth()).filter((r) => !r.namespace.startsWith('AWS/'));
    expect(own.length).toBeGreaterThan(3);
    for (const read of own) {
      const fromCode = emf.some(
        (e) =>
          e.namespace === read.namespace &&
          e.metricName === read.metricName &&
          JSON.stringify(e.dimensions) === JSON.stringify(read.dimensions),
      );
      const fromLogs = filters.some(
        (f) =>
          f.MetricNamespace === read.namespace &&
          f.MetricName === read.metricName &&
          JSON.stringify((f.Dimensions ?? []).map((d) => d.Key).sort()) ===
            JSON.stringify(Object.keys(read.dimensions).sort()),
      );
      expect(fromCode || fromLogs, `${read.alarm}: ${read.namespace} ${read.metricName}`).toBe(true);
    }
  });

  it("sums each table's system errors over every operation its functions are allowed (DeleteItem included)", () => {
    const all = resources(synth().template);
    const functionRoles = new Set(
      Object.values(all)
        .filter((r) => r.Type === 'AWS::Lambda::Function')
        .map((r) => referenced(r.Properties?.Role)),
    );
    const granted = new Map<string, Set<string>>();
    for (const r of Object.values(all)) {
      // The functions' policies (the data plane), not the backup role's.
      if (r.Type !== 'AWS::IAM::Policy') continue;
      const roles = ((r.Properties?.Roles as unknown[] | undefined) ?? []).map(referenced);
      if (!roles.some((role) => role && functionRoles.has(role))) continue;
      const statements =
        (
          r.Properties?.PolicyDocument as
            | { Statement: { Action: string | string[]; Resource: unknown }[] }
            | undefined
        )?.Statement ?? [];
      for (const s of statements) {
        const actions = [s.Action].flat().filter((a) => a.startsWith('dynamodb:'));
        for (const resource of [s.Resource].flat()) {
          // A table's stream (the balance watch's reads): DynamoDB Streams' operations, not the table's.
          if ((resource as { 'Fn::GetAtt'?: string[] })?.['Fn::GetAtt']?.[1] === 'StreamArn') continue;
          const table = referenced(resource);
          if (!table || all[table]?.Type !== 'AWS::DynamoDB::GlobalTable') continue;
          const set = granted.get(table) ?? new Set<string>();
          for (const a of actions) set.add(operationOf(a.slice('dynamodb:'.length)));
          granted.set(table, set);
        }
      }
    }
    expect([...granted.values()].some((ops) => ops.has('DeleteItem'))).toBe(true);
    const summed = new Map<string, Set<string>>();
    for (const read of alarmMetrics(synth()).filter((r) => r.metricName === 'SystemErrors')) {
      const table = referenced(read.dimensions.TableName) ?? '';
      const set = summed.get(table) ?? new Set<string>();
      set.add(String(read.dimensions.Operation));
      summed.set(table, set);
    }
    // The four money tables, the team's and the audit log, and in prod (a custom domain) the dashboard's.
    expect(summed.size).toBe(stage === 'prod' ? 7 : 6);
    for (const [table, ops] of granted)
      expect([...(summed.get(table) ?? [])]).toEqual(expect.arrayContaining([...ops]));
    for (const ops of summed.values()) expect([...ops].sort()).toEqual([...DYNAMODB_OPERATIONS].sort());
  });
});
