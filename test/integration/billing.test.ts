import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getRequestStore } from '../../functions/adapters/dynamodb/index.js';
import { type CallOptions, DynamoWireError } from '../../functions/adapters/dynamodb/wire.js';
import { usdToNano } from '../../functions/core/money.js';
import { billingFailures, settlements } from '../../functions/shared/observability.js';
import { sweepExpiredHolds } from '../../functions/sweeper/sweep.js';
import { addCredits, reconcile, revokeKey, setAccountStatus } from '../../lib/admin/operations.js';
import { inProcessLauncher } from '../../lib/local/emulator.js';
import { ledgerOf, settled } from '../support/settled.js';
import { readSse } from '../support/sse.js';
import { balanceNano, newAccount, startTarget, type Target } from '../support/target.js';

/**
 * Billing that never loses or double-counts a cent: concurrency, injected faults in the settlement call
 * (DynamoDB itself is the real engine, never mocked), top-ups racing charges, account state.
 */
let target: Target;
beforeAll(async () => {
  // The functions run in this thread (inProcessLauncher): the tests reach into their own DynamoDB clients.
  target = await startTarget({ launcher: inProcessLauncher });
});
afterAll(async () => {
  await target?.stop();
});

const client = (apiKey: string) => new OpenAI({ baseURL: target.baseUrl, apiKey, maxRetries: 0 });
const costOf = (usage: unknown) => usdToNano(String((usage as { cost: number }).cost));

async function expectReconciled(accountId: string) {
  const [result] = await reconcile(target.admin, accountId);
  expect(result?.differenceNano).toBe(0n);
  return result;
}

/**
 * Injects a fault into the completions function's own settlement call (getRequestStore's direct
 * TransactWriteItems, wire.ts, the one that writes a ledger entry): `fault(attempt, send)` decides
 * what each attempt the store makes does. Removed after the test.
 */
function injectSettlementFault(
  _name: string,
  fault: (attempt: number, send: () => Promise<unknown>) => Promise<unknown>,
) {
  const wire = getRequestStore().wire;
  const original = wire.call;
  let attempt = 0;
  wire.call = (async (operation: string, input: object, options?: CallOptions) => {
    const items = (input as { TransactItems?: { Put?: { TableName?: string } }[] }).TransactItems;
    const settlement = items?.some((item) => item.Put?.TableName === getRequestStore().tables.ledger);
    const send = () => original.call(wire, operation as 'TransactWriteItems', input, options);
    if (operation !== 'TransactWriteItems' || !settlement) return send();
    attempt += 1;
    return fault(attempt, send);
  }) as typeof wire.call;
  return {
    attempts: () => attempt,
    remove: () => {
      wire.call = original;
    },
  };
}

/** What DynamoDB answers when one item of the transaction conflicts with another write in flight. */
function conflict(): DynamoWireError {
  return new DynamoWireError(
    'TransactionCanceledException',
    'Transaction cancelled, please refer cancellation reasons for specific reasons [None, TransactionConflict]',
    400,
    false,
    { cancellationReasons: [{ Code: 'None' }, { Code: 'TransactionConflict' }] },
  );
}
function namedError(name: string): Error {
  const error = new Error(name);
  error.name = name;
  return error;
}

describe('concurrency', () => {
  it('bills 200 in-flight requests on one account exactly: one entry each, balance drop = sum of usage.cost', async () => {
    const { accountId, key } = await newAccount(target, '100');
    const before = await balanceNano(target, accountId);
    const openai = client(key);
    const requests = Array.from({ length: 200 }, async (_, i) => {
      const content = `request ${i} [[sim:tokens=${5 + (i % 20)}]] [[sim:delay_ms=${i % 3}]]`;
      if (i % 2 === 0) {
        const completion = await openai.chat.completions.create({
          model: 'svc-fast',
          messages: [{ role: 'user', content }],
        });
        return { id: completion.id, cost: costOf(completion.usage) };
      }
      const stream = await openai.chat.completions.create({
        model: 'svc-heavy',
        messages: [{ role: 'user', content }],
        stream: true,
      });
      let id = '';
      let cost = -1n;
      for await (const chunk of stream) {
        id = chunk.id;
        if (chunk.usage) cost = costOf(chunk.usage);
      }
      return { id, cost };
    });
    const results = await Promise.all(requests);
    const sum = results.reduce((total, r) => total + r.cost, 0n);
    expect(results.every((r) => r.cost > 0n)).toBe(true);
    expect(before - (await balanceNano(target, accountId))).toBe(sum);
    const charges = (await ledgerOf(target, accountId)).filter((e) => e.type === 'charge');
    expect(charges).toHaveLength(200);
    expect(new Set(charges.map((c) => c.entryId))).toEqual(new Set(results.map((r) => r.id)));
    await expectReconciled(accountId);
  }, 120_000);

  it('loses nothing when top-ups race with charges', async () => {
    const { accountId, key } = await newAccount(target, '1');
    const openai = client(key);
    const charges = Array.from({ length: 40 }, () =>
      openai.chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'race [[sim:tokens=9]]' }],
      }),
    );
    const topUps = Array.from({ length: 20 }, (_, i) =>
      addCredits(target.admin, accountId, '0.5', `race-${i}`),
    );
    const duplicateTopUps = Array.from({ length: 10 }, () =>
      addCredits(target.admin, accountId, '0.5', 'race-0'),
    );
    const [completions, applied] = await Promise.all([
      Promise.all(charges),
      Promise.all([...topUps, ...duplicateTopUps]),
    ]);
    expect(applied.filter((a) => a.applied)).toHaveLength(20);
    const spent = completions.reduce((total, c) => total + costOf(c.usage), 0n);
    expect(await balanceNano(target, accountId)).toBe(1_000_000_000n + 20n * 500_000_000n - spent);
    await expectReconciled(accountId);
  }, 60_000);
});

describe('settlement under injected faults', () => {
  it.each([
    [
      'a transaction conflict',
      (attempt: number, send: () => Promise<unknown>) =>
        attempt === 1 ? Promise.reject(conflict()) : send(),
    ],
    [
      'throttling',
      (attempt: number, send: () => Promise<unknown>) =>
        attempt <= 2 ? Promise.reject(namedError('ThrottlingException')) : send(),
    ],
    [
      'a timeout after the write committed',
      async (attempt: number, send: () => Promise<unknown>) => {
        const result = await send();
        if (attempt === 1) throw namedError('TimeoutError');
        return result;
      },
    ],
  ])('charges exactly once after %s', async (name, fault) => {
    const { accountId, key } = await newAccount(target);
    const injected = injectSettlementFault(`fault-${name}`, fault);
    try {
      const completion = await client(key).chat.completions.create({
        model: 'svc-fast',
        messages: [{ role: 'user', content: 'x [[sim:tokens=8]]' }],
      });
      // The reply comes before its settlement: wait for the invocation to finish.
      await settled(target);
      expect(injected.attempts()).toBeGreaterThan(1);
      const charges = (await ledgerOf(target, accountId)).filter((e) => e.type === 'charge');
      expect(charges).toHaveLength(1);
      expect(charges[0]?.entryId).toBe(completion.id);
      expect(5_000_000_000n - (await balanceNano(target, accountId))).toBe(costOf(completion.usage));
      await expectReconciled(accountId);
    } finally {
      injected.remove();
    }
  });

  it('retries a settlement for the same generation id without charging twice', async () => {
    const { accountId, key } = await newAccount(target);
    const seen: unknown[] = [];
    // Send every settlement twice, as a Lambda retry would: the second must be a no-op.
    const injected = injectSettlementFault('fault-duplicate', async (_attempt, send) => {
      const result = await send();
      seen.push(await send().catch((e: unknown) => e));
      return result;
    });
    try {
      const completion = await client(key).chat.completions.create({
        model: 'svc-fast',
        messages: [{ role: 'user', content: 'twice' }],
      });
      await settled(target);
      expect(seen).toHaveLength(1);
      expect(5_000_000_000n - (await balanceNano(target, accountId))).toBe(costOf(completion.usage));
      expect((await ledgerOf(target, accountId)).filter((e) => e.type === 'charge')).toHaveLength(1);
    } finally {
      injected.remove();
    }
  });

  it('never charges without a ledger entry: a settlement that keeps failing after the reply is deferred, counted, and billed once by the sweeper', async () => {
    const { accountId, key } = await newAccount(target);
    const failuresBefore = billingFailures.count;
    const deferredBefore = settlements.deferred;
    const injected = injectSettlementFault('fault-permanent', () =>
      Promise.reject(namedError('InternalServerError')),
    );
    let costs = 0n;
    try {
      const plain = await fetch(`${target.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'doomed' }] }),
      });
      // The reply went out with its cost before the settlement was tried.
      expect(plain.status).toBe(200);
      const cost = ((await plain.json()) as { usage: { cost: number } }).usage.cost;
      expect(cost).toBeGreaterThan(0);
      costs += usdToNano(String(cost));
      const streamed = await fetch(`${target.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'svc-fast',
          messages: [{ role: 'user', content: 'doomed' }],
          stream: true,
        }),
      });
      const { data } = await readSse(streamed);
      expect(data.at(-1)).toBe('[DONE]');
      const streamedCost = JSON.parse(data.at(-2) ?? '{}').usage.cost;
      expect(streamedCost).toBeGreaterThan(0);
      costs += usdToNano(String(streamedCost));
      await settled(target);
    } finally {
      injected.remove();
    }
    // Not a billing failure: both are written down where the sweeper finds them.
    expect(billingFailures.count - failuresBefore).toBe(0);
    expect(settlements.deferred - deferredBefore).toBe(2);
    // The sweeper's next run bills each once (the local stack's own sweep may come first: same outcome).
    const sweeper = target.local?.storeAs('sweeper') ?? target.admin.store;
    await sweepExpiredHolds(sweeper);
    await sweepExpiredHolds(sweeper);
    expect((await ledgerOf(target, accountId)).filter((e) => e.type === 'charge')).toHaveLength(2);
    expect(await balanceNano(target, accountId)).toBe(5_000_000_000n - costs);
    expect(await target.admin.store.listHolds(accountId)).toEqual([]);
    await expectReconciled(accountId);
  });
});

describe('the balance floor', () => {
  it('serves a positive balance, lets the last request overdraw, then answers 402', async () => {
    const { accountId, key } = await newAccount(target, '0.000001');
    const completion = await client(key).chat.completions.create({
      model: 'svc-heavy',
      messages: [{ role: 'user', content: 'x [[sim:tokens=50]]' }],
    });
    expect(costOf(completion.usage)).toBeGreaterThan(1_000n);
    expect(await balanceNano(target, accountId)).toBeLessThan(0n);
    const refused = await fetch(`${target.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(refused.status).toBe(402);
    const body = (await refused.json()) as { balance: number };
    expect(body.balance).toBeLessThan(0);
    await expectReconciled(accountId);
  });
});

describe('revocation and account state take effect on the very next request', () => {
  it('lets a stream started before the revocation finish and be billed, and refuses the next request', async () => {
    const { accountId, key, keyId } = await newAccount(target);
    const response = await fetch(`${target.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'svc-fast',
        messages: [{ role: 'user', content: 'slow [[sim:tokens=10]] [[sim:delay_ms=40]]' }],
        stream: true,
      }),
    });
    await revokeKey(target.admin, keyId);
    const { data } = await readSse(response);
    expect(data.at(-1)).toBe('[DONE]');
    const usage = JSON.parse(data.at(-2) ?? '{}').usage;
    expect(5_000_000_000n - (await balanceNano(target, accountId))).toBe(costOf(usage));
    const next = await fetch(`${target.baseUrl}/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(next.status).toBe(401);
  });

  it.each(['suspended', 'banned'] as const)(
    'answers 403 right after the account is %s, and serves it once reinstated',
    async (status) => {
      const { accountId, key } = await newAccount(target);
      const ask = () =>
        fetch(`${target.baseUrl}/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'x' }] }),
        });
      expect((await ask()).status).toBe(200);
      await setAccountStatus(target.admin, accountId, status);
      expect((await ask()).status).toBe(403);
      await setAccountStatus(target.admin, accountId, 'active');
      expect((await ask()).status).toBe(200);
    },
  );
});

describe('reconciliation after all of the above', () => {
  it('finds no difference between any balance and its ledger', async () => {
    const results = await reconcile(target.admin);
    const entries = results.reduce((sum, r) => sum + r.entries, 0);
    const differences = results.filter((r) => r.differenceNano !== 0n);
    console.info(
      `[reconcile] ${results.length} accounts, ${entries} ledger entries, ${differences.length} with a difference`,
    );
    expect(results.length).toBeGreaterThan(10);
    expect(differences).toEqual([]);
  });
});
