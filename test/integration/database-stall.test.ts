import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dynamoTimeouts } from '../../functions/adapters/dynamodb/timeouts.js';
import { usdToNano } from '../../functions/core/money.js';
import { ORIGIN_READ_TIMEOUT_SECONDS } from '../../functions/shared/limits.js';
import { billingFailures } from '../../functions/shared/observability.js';
import { listHolds } from '../../lib/admin/operations.js';
import { type RunningDynamo, startDynamoLocal } from '../../lib/local/dynamodb-local.js';
import { inProcessLauncher } from '../../lib/local/emulator.js';
import { ledgerOf, settled } from '../support/settled.js';
import { eventually, readSse } from '../support/sse.js';
import { balanceNano, newAccount, startTarget, type Target } from '../support/target.js';

/**
 * A database that stops answering (DynamoDB Local paused with SIGSTOP: connections open, nothing
 * answered, as a stalled network path looks). This file starts its own DynamoDB Local so pausing it
 * cannot disturb other test files. The functions run with the deployed default timeouts: 1 s per
 * attempt, 3 attempts, and a read before the upstream call gives up after its 3 s budget.
 * (database-stall-local.test.ts: the same with DynamoDB Local's defaults, as `npm start` runs.)
 */
let dynamo: RunningDynamo;
let target: Target;
const DEPLOYED = dynamoTimeouts({});
/** The stated bound (the read budget), and room for a loaded machine. */
const STATED_BOUND_MS = (DEPLOYED.readBudgetMs ?? Number.POSITIVE_INFINITY) + 2_000;
/** The account function's timeout here (10 s deployed), no longer than a stalled read's 3 s: its own budget must answer first. */
const ACCOUNT_TIMEOUT_MS = 3_000;

beforeAll(async () => {
  dynamo = await startDynamoLocal();
  target = await startTarget({
    dynamoEndpoint: dynamo.endpoint,
    // The functions run in this thread (inProcessLauncher): the test reads the billing-failure counter.
    launcher: inProcessLauncher,
    functions: { models: { timeoutMs: ACCOUNT_TIMEOUT_MS } },
    // Settlement may take the reserve: 4 s here (10 s by default) keeps the test short. The DynamoDB
    // timeouts are the deployed defaults (DynamoDB Local alone would get 5 s per request).
    env: {
      SETTLE_RESERVE_MS: '4000',
      KEEPALIVE_INTERVAL_MS: '500',
      DYNAMODB_REQUEST_TIMEOUT_MS: String(DEPLOYED.requestTimeoutMs),
      DYNAMODB_CONNECT_TIMEOUT_MS: String(DEPLOYED.connectTimeoutMs),
      DYNAMODB_MAX_ATTEMPTS: String(DEPLOYED.maxAttempts),
      DYNAMODB_READ_BUDGET_MS: String(DEPLOYED.readBudgetMs),
    },
  });
});
afterAll(async () => {
  if (dynamo?.pid) process.kill(dynamo.pid, 'SIGCONT');
  await target?.stop();
  await dynamo?.stop();
});

function pause() {
  if (!dynamo.pid) throw new Error('DynamoDB Local has no pid');
  process.kill(dynamo.pid, 'SIGSTOP');
}
function resume() {
  if (dynamo.pid) process.kill(dynamo.pid, 'SIGCONT');
}

async function call(key: string, stream: boolean, content = 'hi [[sim:tokens=3]]') {
  return fetch(`${target.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'svc-fast',
      messages: [{ role: 'user', content }],
      stream,
    }),
  });
}

describe('DynamoDB stalled before admission', () => {
  it('answers JSON and stream requests with a clean 503 within the stated bound, charging nothing', async () => {
    const { accountId, key } = await newAccount(target);
    // Warm: the key's account is known, so the paused read is the one consistent read of the hot path.
    expect((await call(key, false)).status).toBe(200);
    const balance = await balanceNano(target, accountId);
    pause();
    try {
      for (const stream of [false, true]) {
        const started = Date.now();
        const response = await call(key, stream);
        const elapsed = Date.now() - started;
        expect(response.status).toBe(503);
        expect(response.headers.get('retry-after')).toBe('1');
        const body = (await response.json()) as { error: { type: string; code: string; message: string } };
        expect(body.error).toMatchObject({ type: 'server_error', code: 'service_unavailable' });
        expect(body.error.message).toMatch(/Nothing was charged/);
        expect(elapsed).toBeLessThan(STATED_BOUND_MS);
      }
    } finally {
      resume();
    }
    // After SIGCONT the next request is served, and only it is billed.
    const response = await call(key, true);
    expect(response.status).toBe(200);
    const { data } = await readSse(response);
    expect(data.at(-1)).toBe('[DONE]');
    const charges = (await ledgerOf(target, accountId)).filter((e) => e.type === 'charge');
    expect(charges).toHaveLength(2);
    expect(balance - (await balanceNano(target, accountId))).toBe(-(charges[1]?.deltaNano ?? 0n));
  });
});

describe('DynamoDB stalled during settlement', () => {
  it.each([
    // A funded account's reply goes out before its settlement.
    { account: 'funded', credits: '5' },
    // A near-empty account's request holds credit: its reply ends only once the settlement is done
    // or given up (it is what releases the hold), with keep-alives meanwhile.
    { account: 'held', credits: '0.0001' },
  ])(
    'the reply ($account account) still ends with its cost and [DONE]; the settlement is logged with its record and counted, and charges at most once when the database returns',
    async ({ account, credits }) => {
      const { accountId, key } = await newAccount(target, credits);
      const failuresBefore = billingFailures.count;
      const response = await call(
        key,
        true,
        'hi [[sim:tokens=3]] [[sim:pause_after=1]] [[sim:pause_ms=800]]',
      );
      expect(response.status).toBe(200);
      const reader = response.body?.getReader();
      const first = await reader?.read(); // admitted and streaming: the read (and a hold) is done
      expect(first?.done).toBe(false);
      pause();
      let text = new TextDecoder().decode(first?.value);
      try {
        for (;;) {
          const next = await reader?.read();
          if (!next || next.done) break;
          text += new TextDecoder().decode(next.value);
        }
        const blocks = text.split('\n\n');
        const events = blocks.filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));
        // Usage with its cost, then [DONE], database or not.
        expect(events.at(-1)).toBe('[DONE]');
        expect(JSON.parse(events.at(-2) ?? '{}').usage.cost).toBeGreaterThan(0);
        if (account === 'held') {
          // The reply waited for the settlement to give up (its 4 s reserve): counted before [DONE]...
          expect(billingFailures.count - failuresBefore).toBe(1);
          // ...with keep-alives while it waited (every 500 ms here), after the last content chunk.
          const lastContent = blocks.findLastIndex((b) => b.includes('"content"'));
          const waiting = blocks.slice(lastContent + 1).filter((b) => b.startsWith(': keep-alive'));
          expect(waiting.length).toBeGreaterThanOrEqual(3);
        }
        // The settlement gives up within its 4 s reserve, while the database is still paused.
        await eventually(async () => (billingFailures.count > failuresBefore ? true : undefined), 8_000);
      } finally {
        resume();
      }
      expect(billingFailures.count - failuresBefore).toBe(1);
      await chargedAtMostOnce(accountId, credits);
    },
  );

  it("a held JSON reply waits for the settlement to give up, then comes whole with its cost, inside CloudFront's read timeout", async () => {
    const credits = '0.0001';
    const { accountId, key } = await newAccount(target, credits);
    const failuresBefore = billingFailures.count;
    const started = Date.now();
    const pending = call(key, false, 'hi [[sim:tokens=3]] [[sim:first_byte_delay_ms=1500]]');
    // Paused once the hold is placed (before the upstream answers): the settlement is what stalls.
    await eventually(async () => ((await listHolds(target.admin, accountId)).length > 0 ? true : undefined));
    pause();
    try {
      const response = await pending;
      expect(response.status).toBe(200);
      const body = (await response.json()) as { usage: { cost: number } };
      expect(body.usage.cost).toBeGreaterThan(0);
      // The reply came after the settlement gave up (counted first), well inside CloudFront's timeout.
      expect(billingFailures.count - failuresBefore).toBe(1);
      expect(Date.now() - started).toBeLessThan(ORIGIN_READ_TIMEOUT_SECONDS * 1000);
    } finally {
      resume();
    }
    await chargedAtMostOnce(accountId, credits);
  });
});

/**
 * The paused database may still apply the queued transaction when it resumes, at any moment (even
 * between the two reads here): at most one charge, the ledger and the balance agreeing once it has.
 */
async function chargedAtMostOnce(accountId: string, credits: string) {
  await settled(target);
  const { charges, drop } = await eventually(async () => {
    const charges = (await ledgerOf(target, accountId)).filter((e) => e.type === 'charge');
    const drop = usdToNano(credits) - (await balanceNano(target, accountId));
    const agree = drop === (charges.length === 0 ? 0n : -(charges[0]?.deltaNano ?? 0n));
    return agree ? { charges, drop } : undefined;
  }, 5_000);
  expect(charges.length).toBeLessThanOrEqual(1);
  expect(drop).toBe(charges.length === 0 ? 0n : -(charges[0]?.deltaNano ?? 0n));
}

describe('DynamoDB stalled under the account function', () => {
  it.each(['/models', '/credits', '/generation?id=gen-1767225600-AAAAAAAAAAAAAAAAAAAA'])(
    'GET %s answers the clean 503 before the function times out',
    async (path) => {
      const { key } = await newAccount(target);
      expect(
        (await fetch(`${target.baseUrl}/models`, { headers: { authorization: `Bearer ${key}` } })).status,
      ).toBe(200);
      pause();
      try {
        const started = Date.now();
        const response = await fetch(`${target.baseUrl}${path}`, {
          headers: { authorization: `Bearer ${key}` },
        });
        const elapsed = Date.now() - started;
        expect(response.status).toBe(503);
        expect(response.headers.get('retry-after')).toBe('1');
        expect(response.headers.get('x-request-id')).toBeTruthy();
        const body = (await response.json()) as { error: { type: string; code: string } };
        expect(body.error).toMatchObject({ type: 'server_error', code: 'service_unavailable' });
        expect(elapsed).toBeLessThan(ACCOUNT_TIMEOUT_MS);
      } finally {
        resume();
      }
      expect(
        (await fetch(`${target.baseUrl}/models`, { headers: { authorization: `Bearer ${key}` } })).status,
      ).toBe(200);
    },
  );
});
