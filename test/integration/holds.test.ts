import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { needsHold } from '../../functions/billing/holds.js';
import { usdToNano } from '../../functions/billing/money.js';
import type { Hold } from '../../functions/core/store.js';
import { expiredHolds } from '../../functions/shared/observability.js';
import { parseCommandLine, runCommand } from '../../lib/admin/cli.js';
import { getAccount, reconcile } from '../../lib/admin/operations.js';
import { chargeEntry } from '../support/fixtures.js';
import { ledgerOf, settled } from '../support/settled.js';
import { balanceNano, newAccount, startTarget, type Target } from '../support/target.js';

/**
 * Prepaid means prepaid: against DynamoDB Local, an account with one cent cannot be taken far below
 * zero by requests in flight together, holds never leak, and funded accounts pay nothing for it.
 */
let target: Target;
beforeAll(async () => {
  // The functions believe 1000 requests can run at once (the default, AWS's account limit).
  target = await startTarget({ sweepIntervalMs: 200 });
});
afterAll(async () => {
  await target?.stop();
});

const LONG_PROMPT = 'word '.repeat(2_000);

interface Outcome {
  status: number;
  cost?: bigint;
  body?: unknown;
}

async function ask(key: string, stream: boolean, extra: Record<string, unknown> = {}): Promise<Outcome> {
  const response = await fetch(`${target.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'svc-heavy',
      messages: [{ role: 'user', content: `${LONG_PROMPT} [[sim:tokens=40]]` }],
      stream,
      ...extra,
    }),
  });
  const text = await response.text();
  if (response.status !== 200) return { status: response.status, body: JSON.parse(text) };
  if (!stream) {
    return {
      status: 200,
      cost: usdToNano(String((JSON.parse(text) as { usage: { cost: number } }).usage.cost)),
    };
  }
  const events = text
    .split('\n\n')
    .filter((e) => e.startsWith('data: {'))
    .map((e) => JSON.parse(e.slice(6)));
  return { status: 200, cost: usdToNano(String(events.at(-1).usage.cost)) };
}

async function checkBurst(accountId: string, outcomes: Outcome[]) {
  const served = outcomes.filter((o) => o.status === 200);
  const refused = outcomes.filter((o) => o.status !== 200);
  expect(served.length).toBeGreaterThan(0);
  for (const r of refused) {
    expect(r.status).toBe(402);
    expect(r.body).toMatchObject({ error: 'Insufficient credits', topUpUrl: expect.any(String) });
    expect(typeof (r.body as { balance: unknown }).balance).toBe('number');
  }
  const balance = await balanceNano(target, accountId);
  const largest = served.reduce((max, o) => ((o.cost ?? 0n) > max ? (o.cost ?? 0n) : max), 0n);
  // The overdraft bound: at most one request's own bill.
  expect(balance).toBeGreaterThanOrEqual(-largest);
  const charges = (await ledgerOf(target, accountId)).filter((e) => e.type === 'charge');
  expect(charges).toHaveLength(served.length);
  const drop = usdToNano('0.01') - balance;
  expect(charges.reduce((sum, c) => sum - c.deltaNano, 0n)).toBe(drop);
  expect(served.reduce((sum, o) => sum + (o.cost ?? 0n), 0n)).toBe(drop);
  const [result] = await reconcile(target.admin, accountId);
  expect(result?.differenceNano).toBe(0n);
  expect(result?.heldNano).toBe(0n);
  return { served: served.length, refused: refused.length, balance };
}

describe('an account with $0.01 under a burst', () => {
  it('serves 200 concurrent streamed svc-heavy requests without overdrawing by more than one bill', async () => {
    let key = '';
    const { accountId, outcomes } = await (async () => {
      const account = await newAccount(target, '0.01');
      key = account.key;
      const results = await Promise.all(Array.from({ length: 200 }, () => ask(key, true)));
      return { accountId: account.accountId, outcomes: results };
    })();
    const { served, refused } = await checkBurst(accountId, outcomes);
    expect(refused).toBeGreaterThan(150);
    expect(served).toBeLessThan(50);
  }, 120_000);

  it('holds the same bound for a mix of JSON and stream requests with max_tokens set', async () => {
    const account = await newAccount(target, '0.01');
    const outcomes = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        ask(account.key, i % 2 === 0, { max_tokens: 50 + (i % 5) * 100 }),
      ),
    );
    await checkBurst(account.accountId, outcomes);
  }, 120_000);
});

describe('a request from a near-empty account with nothing in flight', () => {
  it('is served however small the balance, and its own overage is the only overdraft', async () => {
    const { accountId, key } = await newAccount(target, '0.000001');
    const served = await ask(key, false);
    expect(served.status).toBe(200);
    expect(await balanceNano(target, accountId)).toBe(usdToNano('0.000001') - (served.cost ?? 0n));
    const refused = await ask(key, false);
    expect(refused.status).toBe(402);
    expect((refused.body as { message: string }).message).toMatch(/credit balance is -0\.\d+ USD/);
  });

  it('gets a 402 that says so when its credit is held by a request in flight', async () => {
    const { accountId, key } = await newAccount(target, '0.01');
    const slow = fetch(`${target.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'svc-heavy',
        messages: [{ role: 'user', content: 'slow [[sim:tokens=5]] [[sim:delay_ms=300]]' }],
        stream: true,
      }),
    });
    const first = await slow;
    const refused = await ask(key, false);
    expect(refused.status).toBe(402);
    expect(refused.body).toMatchObject({ balance: 0.01 });
    expect((refused.body as { message: string }).message).toMatch(/held by requests in flight/);
    await first.text();
    // The stream's end reaches the client before its settlement releases the hold.
    await settled(target);
    expect((await getAccount(target.admin, accountId))?.heldNano).toBe(0n);
  });
});

describe('holds never leak', () => {
  it('releases a hold whose request was killed once it expires, and admin holds shows it before and not after', async () => {
    const { accountId, key } = await newAccount(target, '0.02');
    // What a killed invocation leaves: its hold, expiring at the function's timeout plus a margin.
    const hold: Hold = {
      accountId,
      holdId: 'gen-1767225600-KILLEDKILLEDKILLEDKI',
      amountNano: usdToNano('0.015'),
      expiresAt: Date.now() + 1_500,
      createdAt: new Date().toISOString(),
    };
    expect(await target.admin.store.placeHold(hold)).toBe('held');
    const show = async () =>
      (await runCommand(target.admin, parseCommandLine(['holds', accountId, '--json']))).json as {
        holds: { holdId: string; expired: boolean }[];
      };
    expect((await show()).holds).toEqual([expect.objectContaining({ holdId: hold.holdId, expired: false })]);
    // Held credit is not available: a request that would need more than what is left is refused.
    expect((await ask(key, false)).status).toBe(200);
    const releasedBefore = expiredHolds.released;
    // Past its expiry, the local sweep (every 200 ms) releases it; polled, as a busy machine may delay it.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, hold.expiresAt - Date.now())));
    await expect.poll(async () => (await show()).holds, { timeout: 15_000, interval: 100 }).toEqual([]);
    expect(expiredHolds.released - releasedBefore).toBe(1);
    const account = await getAccount(target.admin, accountId);
    expect(account?.heldNano).toBe(0n);
    const [result] = await reconcile(target.admin, accountId);
    expect(result?.differenceNano).toBe(0n);
  });

  it('counts a held amount that no hold explains as a difference in reconcile', async () => {
    const { accountId } = await newAccount(target, '1');
    const hold: Hold = {
      accountId,
      holdId: 'gen-1767225600-ORPHANORPHANORPHANOR',
      amountNano: 5_000n,
      expiresAt: Date.now() + 60_000,
      createdAt: new Date().toISOString(),
    };
    await target.admin.store.placeHold(hold);
    // The hold item vanishes without its amount being given back (a hand edit, a bug): reconcile sees it.
    await target.admin.store.releaseHold(hold);
    await target.admin.store.placeHold({ ...hold, holdId: `${hold.holdId}X` });
    const store = target.admin.store as DynamoStore;
    const { DeleteItemCommand } = await import('@aws-sdk/client-dynamodb');
    await store.client.send(
      new DeleteItemCommand({
        TableName: store.tables.holds,
        Key: { accountId: { S: accountId }, holdId: { S: `${hold.holdId}X` } },
      }),
    );
    const [result] = await reconcile(target.admin, accountId);
    expect(result?.differenceNano).toBe(5_000n);
    const cli = await runCommand(target.admin, parseCommandLine(['reconcile', accountId]));
    expect(cli.exitCode).toBe(1);
  });
});

describe('random interleavings of admissions, settlements and expiries (property, against DynamoDB Local)', () => {
  it('keep available credit above minus one worst case and release no hold twice', async () => {
    const store = target.admin.store as DynamoStore;
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            fc.record({ op: fc.constant('admit' as const), worst: fc.bigInt({ min: 1n, max: 5_000n }) }),
            fc.record({
              op: fc.constant('settle' as const),
              pick: fc.nat(),
              fraction: fc.integer({ min: 0, max: 100 }),
            }),
            fc.record({ op: fc.constant('expire' as const), pick: fc.nat() }),
          ),
          { minLength: 5, maxLength: 25 },
        ),
        fc.bigInt({ min: 1n, max: 8_000n }),
        async (ops, credit) => {
          run += 1;
          const accountId = `prop-${Date.now().toString(36)}-${run}`;
          await store.createAccount(accountId, credit, new Date().toISOString());
          const live: Hold[] = [];
          const released = new Set<string>();
          let maxWorst = 0n;
          for (const [index, step] of ops.entries()) {
            if (step.op === 'admit') {
              const account = await store.getAccount(accountId);
              if (!account || account.balanceNano - account.heldNano <= 0n) continue; // 402
              if (!needsHold(account, step.worst, 4)) continue; // fast path: settles below its worst case
              const hold: Hold = {
                accountId,
                holdId: `gen-1767225600-P${run}x${index}`,
                amountNano: step.worst,
                // Far ahead, so the stack's own sweeper leaves it alone; "expire" below plays the clock.
                expiresAt: Date.now() + 3_600_000,
                createdAt: new Date().toISOString(),
              };
              if ((await store.placeHold(hold)) === 'held') {
                live.push(hold);
                if (step.worst > maxWorst) maxWorst = step.worst;
              }
            } else if (live.length > 0) {
              const [hold] = live.splice(step.pick % live.length, 1);
              if (!hold) continue;
              if (step.op === 'settle') {
                const billed = (hold.amountNano * BigInt(step.fraction)) / 100n;
                await store.settleCharge(
                  chargeEntry(accountId, 'key_prop', billed, {
                    generationId: hold.holdId,
                    promptTokens: 1,
                    completionTokens: 1,
                    upstreamCostUsd: '0',
                  }),
                  { hold },
                );
              } else {
                const later = hold.expiresAt + 1;
                expect(await store.releaseHold(hold, { onlyIfExpiredAt: hold.expiresAt - 1 })).toBe(false);
                const first = await store.releaseHold(hold, { onlyIfExpiredAt: later });
                const second = await store.releaseHold(hold, { onlyIfExpiredAt: later });
                expect(first).toBe(true);
                expect(second).toBe(false);
                expect(released.has(hold.holdId)).toBe(false);
                released.add(hold.holdId);
              }
            }
            const account = await store.getAccount(accountId);
            if (!account) throw new Error('account gone');
            expect(account.balanceNano - account.heldNano).toBeGreaterThanOrEqual(-maxWorst);
            expect(account.heldNano).toBe(live.reduce((sum, h) => sum + h.amountNano, 0n));
          }
        },
      ),
      { numRuns: 20 },
    );
  }, 120_000);
});

describe('a refused hold says why', () => {
  it('is a 403 reason, not a credit refusal, when the account was suspended or banned after its read', async () => {
    const { accountId } = await newAccount(target, '100');
    const hold = (holdId: string): Hold => ({
      accountId,
      holdId,
      amountNano: usdToNano('0.5'),
      expiresAt: Date.now() + 60_000,
      createdAt: new Date().toISOString(),
    });
    // A funded account, suspended between a request's read and its hold (the admission race).
    await target.admin.store.setAccountStatus(accountId, 'suspended', new Date().toISOString());
    expect(await target.admin.store.placeHold(hold('gen-1767225600-SUSPENDEDSUSPENDEDSU'))).toBe('suspended');
    await target.admin.store.setAccountStatus(accountId, 'banned', new Date().toISOString());
    expect(await target.admin.store.placeHold(hold('gen-1767225600-BANNEDBANNEDBANNEDBA'))).toBe('banned');
    // Active again with no credit left: the refusal is the credit's.
    await target.admin.store.setAccountStatus(accountId, 'active', new Date().toISOString());
    expect(await target.admin.store.placeHold({ ...hold('gen-1767225600-BIGBIGBIGBIGBIGBIGBI') })).toBe(
      'held',
    );
    const { accountId: empty } = await newAccount(target, '0.000001');
    await target.admin.store.placeHold({ ...hold('gen-1767225600-FIRSTFIRSTFIRSTFIRST'), accountId: empty });
    expect(
      await target.admin.store.placeHold({
        ...hold('gen-1767225600-SECONDSECONDSECONDSE'),
        accountId: empty,
      }),
    ).toBe('refused');
    expect(await getAccount(target.admin, accountId)).toMatchObject({ heldNano: usdToNano('0.5') });
  });
});
