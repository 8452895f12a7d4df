import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeKey } from '../../lib/admin/operations.js';
import { auditBilling, completeOnce } from '../support/busy-load.js';
import { limitsOf, startLimitedTarget } from '../support/limits.js';
import { settled } from '../support/settled.js';
import { balanceNano, newAccount, type Target } from '../support/target.js';

const complete = (key: string, i: number, startedAfter = false) => completeOnce(target, key, i, startedAfter);
const audit = (accountId: string, before: bigint, served: Awaited<ReturnType<typeof complete>>[]) =>
  auditBilling(target, accountId, before, served);

/**
 * One busy account with DynamoDB's limits in front of DynamoDB Local, at scale 2: half DynamoDB's
 * rates, and every write holds its items twice its time in DynamoDB Local, so that a burst here meets
 * the conflicts of a burst twice its rate (at scale 1 today's code left 3 of 50 unbilled in one run, few
 * enough to come out 0 on a lucky run). Every generation a client was
 * served must be in the ledger once, and the balance must have dropped by exactly the sum of the
 * `usage.cost` the clients saw, nothing left to a log line.
 *
 * Before settlements were retried with jittered backoff to their deadline (and deferred to the
 * sweeper past it), these bursts left generations unbilled: concurrent settlements were cancelled with
 * TransactionConflict and ran out of their 8 attempts (measured: 100 at once left 3 unbilled at scale 1
 * and 4 at scale 2; 200 left 8 and 6; the held path at $5 answered 9 of 100 with 503). The account's
 * balance is still one item, so these bursts are served by retries, not by spreading the writes: one
 * item takes at most about 500 settlements a second.
 */
let target: Target;
beforeAll(async () => {
  target = await startLimitedTarget(2);
});
afterAll(async () => {
  await target?.stop();
});

describe('the limits layer under the service', () => {
  it('carries the service: a request is served and its settlement is charged to the account partition', async () => {
    const { accountId, key } = await newAccount(target, '10');
    limitsOf(target).resetMetrics();
    expect((await complete(key, 0)).status).toBe(200);
    await settled(target);
    const partitions = limitsOf(target).metrics().partitions;
    const account = partitions.find(
      (p) => p.table === target.tables.accounts && p.key === JSON.stringify({ S: accountId }),
    );
    // The settlement's transaction: at least 2 write units (1 KB or less, doubled) on the account item.
    expect(account?.writeUnits).toBeGreaterThanOrEqual(2);
    expect(account?.readUnits).toBeGreaterThan(0);
  });
});

describe('bursts of concurrent requests on one funded account', () => {
  async function burst(n: number) {
    const { accountId, key } = await newAccount(target, '100');
    const before = await balanceNano(target, accountId);
    const served = await Promise.all(Array.from({ length: n }, (_, i) => complete(key, i)));
    const result = await audit(accountId, before, served);
    expect(result).toEqual({
      statuses: { 200: n },
      unbilled: 0,
      duplicateCharges: 0,
      balanceDropNano: result.servedCostNano,
      ledgerSumNano: result.servedCostNano,
      servedCostNano: result.servedCostNano,
    });
  }
  const title = '%i at once: every generation billed once, balance drop = ledger sum = sum of usage.cost';

  it.each([50, 100, 200])(title, burst, 180_000);
});

describe('the held path: an account whose credit does not cover its concurrency', () => {
  // Every hold is a write to the account item: concurrent ones conflict and are retried, not a 503.
  it('serves a burst of 100 without a 503 (402 once the credit is held), billing each served generation once', async () => {
    const { accountId, key } = await newAccount(target, '5');
    const before = await balanceNano(target, accountId);
    const served = await Promise.all(Array.from({ length: 100 }, (_, i) => complete(key, i)));
    const { statuses, ...result } = await audit(accountId, before, served);
    const { 200: _served, 402: _refused, ...others } = statuses;
    expect({ others, ...result }).toEqual({
      others: {},
      unbilled: 0,
      duplicateCharges: 0,
      balanceDropNano: result.servedCostNano,
      ledgerSumNano: result.servedCostNano,
      servedCostNano: result.servedCostNano,
    });
  }, 180_000);
});

describe('revocation during the load', () => {
  it('refuses every request that starts after the revoke completes, while the ones before it finish', async () => {
    const { accountId, key, keyId } = await newAccount(target, '100');
    const before = await balanceNano(target, accountId);
    const early = Array.from({ length: 60 }, (_, i) => complete(key, i));
    // Revoke once some of the load has been served (readiness, not a timer).
    await Promise.race(early);
    await revokeKey(target.admin, keyId);
    const late = Array.from({ length: 60 }, (_, i) => complete(key, 100 + i, true));
    const served = await Promise.all([...early, ...late]);
    expect(served.filter((s) => s.startedAfter).map((s) => s.status)).toEqual(Array(60).fill(401));
    const result = await audit(accountId, before, served);
    expect(result.balanceDropNano).toBe(result.servedCostNano);
  }, 120_000);
});
