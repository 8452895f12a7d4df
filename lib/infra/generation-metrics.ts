import { Unit } from 'aws-cdk-lib/aws-cloudwatch';
import { FilterPattern, type IFilterPattern, type ILogGroup, MetricFilter } from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';

import { GENERATION_USAGE_MESSAGE } from '../../functions/billing/usage-line.js';

/*
 * A generation's metrics (tokens and billed amount by tier) are read by CloudWatch from the one line
 * the completions function logs for it, `generation usage` (functions/billing/settle.ts), by
 * metric filters on its log group: the function writes no metrics line of its own for a generation,
 * which would be a second write to its log stream per request. The line is logged at INFO: with
 * LOG_LEVEL above it, these metrics (and `admin bill-logged`) have nothing to read.
 */

/** Each metric, and where in the logged line its value is (a JSON path into the line). */
export const GENERATION_METRICS = [
  { metricName: 'PromptTokens', value: '$.record.promptTokens' },
  { metricName: 'CompletionTokens', value: '$.record.completionTokens' },
  { metricName: 'BilledMicroUsd', value: '$.billedMicroUsd' },
] as const;

/** The metrics' one dimension: the tier, from the same line. */
export const GENERATION_METRIC_DIMENSIONS = { tier: '$.record.tier' } as const;

/** Every tier's billed amount (CloudWatch keeps each tier's metric apart; the dashboard sums them). */
export const BILLED_SEARCH = '{HostedModelApi,tier} MetricName="BilledMicroUsd"';

/**
 * The pattern that matches a generation's usage line and no other: its JSON `message` field. The
 * metric filters below and the subscription that delivers the lines to the logged-usage function
 * (lib/infra/api-stack.ts) both use it.
 * https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/FilterAndPatternSyntax.html
 */
export const usageLinePattern = (): IFilterPattern =>
  FilterPattern.stringValue('$.message', '=', GENERATION_USAGE_MESSAGE);

export function addGenerationMetrics(scope: Construct, logGroup: ILogGroup, namespace: string): void {
  for (const { metricName, value } of GENERATION_METRICS) {
    new MetricFilter(scope, `${metricName}Filter`, {
      logGroup,
      metricNamespace: namespace,
      metricName,
      filterPattern: usageLinePattern(),
      metricValue: value,
      dimensions: { ...GENERATION_METRIC_DIMENSIONS },
      unit: Unit.COUNT,
    });
  }
}
