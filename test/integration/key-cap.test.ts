import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { worstCaseBilledNano } from '../../functions/billing/holds.js';
import { capShareNano } from '../../functions/billing/key-cap.js';
import { promptBound } from '../../functions/billing/usage-bounds.js';
import { loadCompletionsConfig } from '../../functions/completions/config.js';
import { usdToNano } from '../../functions/core/money.js';
import { parseChatRequest } from '../../functions/core/schemas.js';
import { type Hold, utcDay } from '../../functions/core/store.js';
import { outputCap } from '../../functions/core/tiers.js';
import { startSimulator } from '../../functions/simulator/server.js';
import { parseCommandLine, runCommand } from '../../lib/admin/cli.js';
import { reconcile } from '../../lib/admin/operations.js';
import { chargeEntry } from '../support/fixtures.js';
import { ledgerOf, settled } from '../support/settled.js';
import { getWithKey, landTransfers, newAccount, startTarget, type Target } from '../support/target.js';

/**
 * A key's daily spend cap against DynamoDB Local and the whole local stack (every call held to the
 * stack's IAM policies): its bound (core/store.ts, "KEY DAILY CAPS": each slice at most one
 * request's worst case past its share, so a day's spend at most cap + n x one worst case) over random
 * interleavings of admissions, settlements, releases and expiries, and under 200 concurrent requests
 * on one capped key, unsplit and split into 4; the refusals are 402 and never reach the upstream.
 * With per-key daily caps on (KEY_DAILY_CAPS=on); off, the default, is key-cap-off.test.ts.
 */
let target: Target;
let simulator: Awaited<ReturnType<typeof startSimulator>>;
let proxy: Server;
/** Chat completion calls that reached the upstream. */
let upstreamCalls = 0;

beforeAll(async () => {
  simulator = await startSimulator({ port: 0 });
  const upstream = new URL(simulator.url);
  // The simulator behind a counter: what a refused request must never reach.
  proxy = createServer((req, res) => {
    if (req.method === 'POST' && req.url?.endsWith('/chat/completions')) upstreamCalls += 1;
    const forwarded = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        path: req.url,
        method: req.method,
        headers: req.headers,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forwarded.on('error', () => res.destroy());
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const { port } = proxy.address() as AddressInfo;
  // Per-key daily caps on (off by default: key-cap-off.test.ts).
  target = await startTarget({
    env: { KEY_DAILY_CAPS: 'on' },
    sweepIntervalMs: 200,
    upstreamBaseUrl: `http://127.0.0.1:${port}/v1`,
  });
}, 60_000);
afterAll(async () => {
  await target?.stop();
  await new Promise((resolve) => proxy?.close(resolve));
  await simulator?.close();
});

/** The key's day counter on one slice item, read directly. */
async function counterOn(accountId: string, slice: number, day: string, keyId: string): Promise<bigint> {
  const out = await target.client.send(
    new GetItemCommand({
      TableName: target.tables.accounts,
      Key: { accountId: { S: slice === 0 ? accountId : `${accountId}#${slice}` } },
      ConsistentRead: true,
    }),
  );
  return BigInt(out.Item?.[`kc_${day.replaceAll('-', '')}_${keyId}`]?.N ?? '0');
}

const DAY = '2030-01-01';
/** Hold ids unique to this run of the file (a hold's id is its transaction's token for ten minutes). */
const SESSION = Math.random().toString(36).slice(2, 8);
const AT = `${DAY}T12:00:00.000Z`;

describe('random interleavings of a capped key’s admissions, settlements, releases and expiries (property, DynamoDB Local)', () => {
  it.each([1, 4])(
    'keep every slice at most one worst case past its share, and the counters exact (%i slice(s))',
    async (slices) => {
      const store = target.admin.store as DynamoStore;
      let run = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.oneof(
              fc.record({
                op: fc.constant('admit' as const),
                worst: fc.bigInt({ min: 1n, max: 5_000n }),
                slice: fc.nat(),
              }),
              fc.record({
                op: fc.constant('settle' as const),
                pick: fc.nat(),
                fraction: fc.integer({ min: 0, max: 100 }),
              }),
              fc.record({ op: fc.constant('release' as const), pick: fc.nat() }),
              fc.record({ op: fc.constant('expire' as const), pick: fc.nat() }),
            ),
            { minLength: 5, maxLength: 25 },
          ),
          fc.bigInt({ min: 1n, max: 12_000n }),
          async (ops, capNano) => {
            run += 1;
            const { accountId, keyId } = await newAccount(target, '1000');
            if (slices > 1) {
              await store.splitAccount(accountId, slices);
              await landTransfers(target);
            }
            await store.setKeyDailyCap(accountId, keyId, capNano);
            const live: Hold[] = [];
            const settledOn = Array.from({ length: slices }, () => 0n);
            let maxWorst = 0n;
            for (const [index, step] of ops.entries()) {
              if (step.op === 'admit') {
                const slice = step.slice % slices;
                const share = capShareNano(capNano, slices, slice);
                // As Generation.admit: refused at the read once the share is spent, else held.
                if ((await counterOn(accountId, slice, DAY, keyId)) >= share) continue;
                const hold: Hold = {
                  accountId,
                  holdId: `gen-1893499200-K${slices}${SESSION}r${run}x${index}`,
                  ...(slice ? { slice } : {}),
                  amountNano: step.worst,
                  // Far ahead, so the stack's own sweeper leaves it alone; "expire" plays the clock.
                  expiresAt: Date.now() + 3_600_000,
                  createdAt: AT,
                  keyId,
                };
                if (step.worst > maxWorst) maxWorst = step.worst;
                const placed = await store.placeHold(hold, { capShareNano: share });
                expect(['held', 'capped']).toContain(placed);
                if (placed === 'held') live.push(hold);
              } else if (live.length > 0) {
                const [hold] = live.splice(step.pick % live.length, 1);
                if (!hold) continue;
                if (step.op === 'settle') {
                  const billed = (hold.amountNano * BigInt(step.fraction)) / 100n;
                  const outcome = await store.settleCharge(
                    chargeEntry(accountId, keyId, billed, {
                      generationId: hold.holdId,
                      ...(hold.slice ? { slice: hold.slice } : {}),
                      createdAt: AT,
                      promptTokens: 1,
                      completionTokens: 1,
                      upstreamCostUsd: '0',
                    }),
                    { hold },
                  );
                  expect(outcome).toBe('settled');
                  settledOn[hold.slice ?? 0] = (settledOn[hold.slice ?? 0] ?? 0n) + billed;
                } else if (step.op === 'release') {
                  expect(await store.releaseHold(hold)).toBe(true);
                } else {
                  const [listed] = (await store.listHolds(accountId)).filter((h) => h.holdId === hold.holdId);
                  // The sweeper's release is of the hold as listed: its item says which key's counter.
                  expect(listed?.keyId).toBe(keyId);
                  expect(
                    await store.releaseHold(listed ?? hold, { onlyIfExpiredAt: hold.expiresAt + 1 }),
                  ).toBe(true);
                }
              }
              for (let slice = 0; slice < slices; slice++) {
                const counter = await counterOn(accountId, slice, DAY, keyId);
                const held = live
                  .filter((h) => (h.slice ?? 0) === slice)
                  .reduce((sum, h) => sum + h.amountNano, 0n);
                // Exact: the slice's charges of the day plus its live holds.
                expect(counter).toBe((settledOn[slice] ?? 0n) + held);
                // The bound: at most one worst case past the share (strictly less: a hold needs counter < share).
                expect(counter).toBeLessThan(
                  capShareNano(capNano, slices, slice) + (maxWorst > 0n ? maxWorst : 1n),
                );
              }
            }
            const spent = settledOn.reduce((sum, nano) => sum + nano, 0n);
            expect(spent).toBeLessThanOrEqual(capNano + BigInt(slices) * maxWorst);
            expect(await store.keyDailySpend(accountId, keyId, DAY)).toBe(
              spent + live.reduce((sum, h) => sum + h.amountNano, 0n),
            );
          },
        ),
        { numRuns: slices === 1 ? 20 : 10 },
      );
    },
    240_000,
  );
});

const BODY = {
  model: 'svc-fast',
  messages: [{ role: 'user', content: 'capped [[sim:tokens=12]]' }],
  max_tokens: 16,
};

/** The worst case of one BODY request, as the completions function computes its hold. */
function worstCaseOfBody(): bigint {
  const config = loadCompletionsConfig({ UPSTREAM_BASE_URL: 'http://127.0.0.1:1/v1' });
  const text = JSON.stringify(BODY);
  const request = parseChatRequest(text);
  const tier = config.tiers[request.model];
  return worstCaseBilledNano(
    promptBound(Buffer.byteLength(text), request.messages),
    outputCap(request, tier),
    tier.targets,
  );
}

async function ask(key: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${target.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(BODY),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('200 concurrent requests on one capped key', () => {
  it.each([1, 4])(
    'spend at most cap + n x one worst case today, and the rest are 402s that never reach the upstream (%i slice(s))',
    async (slices) => {
      const { accountId, key, keyId } = await newAccount(target, '5');
      if (slices > 1) {
        await target.admin.store.splitAccount(accountId, slices);
        await landTransfers(target);
      }
      const capNano = usdToNano('0.005');
      // The operator's command: `key cap <keyId> --usd 0.005`.
      const set = await runCommand(
        target.admin,
        parseCommandLine(['key', 'cap', keyId, '--usd', '0.005', '--json']),
      );
      expect(set.json).toMatchObject({ keyId, dailyCap: '0.005' });
      const worst = worstCaseOfBody();
      const before = upstreamCalls;
      const outcomes = await Promise.all(Array.from({ length: 200 }, () => ask(key)));
      await settled(target);
      const served = outcomes.filter((o) => o.status === 200);
      const refused = outcomes.filter((o) => o.status !== 200);
      expect(served.length).toBeGreaterThan(0);
      expect(refused.length).toBeGreaterThan(0);
      for (const r of refused) {
        expect(r.status).toBe(402);
        expect(r.body).toMatchObject({ error: 'Key daily spend cap reached', topUpUrl: expect.any(String) });
        expect(r.body.message).toMatch(
          /daily spend cap of 0\.005 USD is reached\. It resets at 00:00 UTC \(next: \d{4}-\d\d-\d\dT00:00:00\.000Z\)/,
        );
        // Where the cap is raised or removed: the dashboard's Settings → API page, not Billing.
        expect(r.body.message).toMatch(
          /Raise or remove the cap at http:\/\/[^ ]+\/dashboard\/settings\/api,/,
        );
        // The account's balance, not the key's.
        expect(typeof r.body.balance).toBe('number');
        expect(r.body.balance).toBeGreaterThan(4.9);
      }
      // Refused before the upstream: it was called once per served request, never for a refused one.
      expect(upstreamCalls - before).toBe(served.length);
      const today = utcDay(new Date().toISOString());
      const charges = (await ledgerOf(target, accountId)).filter(
        (e) => e.type === 'charge' && e.keyId === keyId,
      );
      expect(charges).toHaveLength(served.length);
      const spent = charges.reduce((sum, e) => sum - e.deltaNano, 0n);
      expect(charges.every((e) => utcDay(e.createdAt) === today)).toBe(true);
      // The bound.
      expect(spent).toBeLessThanOrEqual(capNano + BigInt(slices) * worst);
      // Nothing left held: every hold came off the balance and the counters.
      expect(await target.admin.store.keyDailySpend(accountId, keyId, today)).toBe(spent);
      const [result] = await reconcile(target.admin, accountId);
      expect(result?.differenceNano).toBe(0n);
      expect(result?.heldNano).toBe(0n);

      // GET /api/v1/key: the cap, what is left of it today (never below 0), reset daily, today's usage.
      const { status, body } = await getWithKey(target, '/key', key);
      expect(status).toBe(200);
      const data = body.data as Record<string, unknown>;
      expect(data.limit).toBe(0.005);
      expect(data.limit_reset).toBe('daily');
      expect(usdToNano(String(data.usage_daily))).toBe(spent);
      expect(usdToNano(String(data.limit_remaining))).toBe(spent >= capNano ? 0n : capNano - spent);
    },
    180_000,
  );
});

describe('the counters around a capped key', () => {
  it("are taken off by the sweeper's expiry release, and past days' are removed by the roll-up", async () => {
    const store = target.admin.store as DynamoStore;
    const { accountId, keyId } = await newAccount(target, '1');
    await store.setKeyDailyCap(accountId, keyId, 10_000n);
    const now = new Date().toISOString();
    const today = utcDay(now);
    const hold: Hold = {
      accountId,
      holdId: 'gen-1767225600-EXPIRINGCAPPEDHOLDXX',
      amountNano: 4_000n,
      expiresAt: Date.now() + 500,
      createdAt: now,
      keyId,
    };
    expect(await store.placeHold(hold, { capShareNano: 10_000n })).toBe('held');
    expect(await counterOn(accountId, 0, today, keyId)).toBe(4_000n);
    await expect
      .poll(async () => (await store.listHolds(accountId)).length, { timeout: 15_000, interval: 100 })
      .toBe(0);
    expect(await counterOn(accountId, 0, today, keyId)).toBe(0n);

    // Yesterday's charge leaves yesterday's counter; the roll-up after midnight removes it, not today's.
    const yesterday = new Date(Date.now() - 86_400_000).toISOString();
    await store.settleCharge(
      chargeEntry(accountId, keyId, 700n, {
        generationId: 'gen-1767225600-YESTERDAYCHARGEXXXX',
        createdAt: yesterday,
      }),
    );
    await store.settleCharge(
      chargeEntry(accountId, keyId, 300n, {
        generationId: 'gen-1767225600-TODAYCHARGEXXXXXXXX',
        createdAt: now,
      }),
    );
    expect(await counterOn(accountId, 0, utcDay(yesterday), keyId)).toBe(700n);
    await store.rollUpActivity(today);
    expect(await counterOn(accountId, 0, utcDay(yesterday), keyId)).toBe(0n);
    expect(await counterOn(accountId, 0, today, keyId)).toBe(300n);
    // The tier counters moved to the day item as before: Activity still shows yesterday's spend.
    const days = await store.dailySpend(accountId, { today, days: 2 });
    expect(Object.values(days[0]?.byTier ?? {}).reduce((sum, nano) => sum + nano, 0n)).toBe(700n);
  }, 60_000);

  it('refuses a cap on a key of another account, and removes a cap', async () => {
    const store = target.admin.store;
    const mine = await newAccount(target, '1');
    const theirs = await newAccount(target, '1');
    await expect(store.setKeyDailyCap(mine.accountId, theirs.keyId, 5n)).rejects.toMatchObject({
      name: 'KeyNotFoundError',
    });
    expect((await store.setKeyDailyCap(mine.accountId, mine.keyId, 5n)).dailyCapNano).toBe(5n);
    const removed = await store.setKeyDailyCap(mine.accountId, mine.keyId, undefined);
    expect(removed.dailyCapNano).toBeUndefined();
    const { body } = await getWithKey(target, '/key', mine.key);
    expect(body.data).toMatchObject({ limit: null, limit_remaining: null, limit_reset: null });
  });
});
