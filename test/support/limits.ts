import type { DynamoLimits } from '../../lib/local/dynamodb-limits.js';
import type { LocalStackOptions } from '../../lib/local/stack.js';
import { startTarget, type Target } from './target.js';

/**
 * The local stack with DynamoDB's limits in front of DynamoDB Local (lib/local/dynamodb-limits.ts):
 * per-partition-key throughput at 1/`scale` of DynamoDB's, transactions cancelled on held items. A
 * deployed stack (SVC_BASE_URL) has the real limits: there is no layer, and `limitsOf` says so.
 */
export function startLimitedTarget(scale: number, options: LocalStackOptions = {}): Promise<Target> {
  return startTarget({ ...options, limits: { scale } });
}

export function limitsOf(target: Target): DynamoLimits {
  const limits = target.local?.limits;
  if (!limits) throw new Error('this target runs without the limits layer');
  return limits;
}
