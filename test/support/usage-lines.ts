/**
 * Usage lines as the completions function logs them (functions/billing/settle.ts): the record, and
 * its signature under the usage-signing key. Tests sign with TEST_SIGNING_KEY, and check lines against
 * it and the simulator's tiers, as the local stack's functions do.
 */
import { GENERATION_USAGE_MESSAGE } from '../../functions/billing/usage-line.js';
import type { UsageLineChecks } from '../../functions/billing/usage-lines.js';
import { signUsageRecord, usageRecordOf } from '../../functions/billing/usage-record.js';
import type { ChargeEntry, Hold } from '../../functions/core/store.js';
import { parseTierConfig, singleUpstreamConfig } from '../../functions/core/tiers.js';

export const TEST_SIGNING_KEY = 'usage-signing-key-of-the-tests';

/** The tiers `npm start` prices by: every tier at the simulator's prices. */
export const SIMULATOR_TIERS = parseTierConfig(singleUpstreamConfig('http://simulator.invalid/v1'));

export const TEST_CHECKS: UsageLineChecks = { keys: [TEST_SIGNING_KEY], tiers: SIMULATOR_TIERS };

/**
 * A `generation usage` line for `record` (usageRecordOf's shape, or any object), signed with `key`
 * (null: unsigned), with `extra` fields beside it as the function logs them.
 */
export function usageLineOf(
  record: object,
  key: string | null = TEST_SIGNING_KEY,
  extra: Record<string, unknown> = {},
): string {
  return JSON.stringify({
    level: 'INFO',
    message: GENERATION_USAGE_MESSAGE,
    record,
    ...(key !== null ? { signature: signUsageRecord(JSON.stringify(record), key) } : {}),
    ...extra,
  });
}

/** The line of a generation's entry and hold, signed with the tests' key (or `key`; null: unsigned). */
export const signedUsageLine = (entry: ChargeEntry, hold?: Hold, key: string | null = TEST_SIGNING_KEY) =>
  usageLineOf(usageRecordOf(entry, hold), key);
