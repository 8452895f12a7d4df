import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { complete } from '../../../functions/completions/complete.js';
import { loadCompletionsConfig } from '../../../functions/completions/config.js';
import { authorize } from '../../../functions/core/access.js';
import { HttpError } from '../../../functions/core/errors.js';
import { nanoToUsd, usdToNano } from '../../../functions/core/money.js';
import { parseChatRequest } from '../../../functions/core/schemas.js';
import { startSimulator } from '../../../functions/simulator/server.js';
import { MemoryStore } from '../../support/memory-store.js';

/**
 * A key's daily spend cap on the request path, with the clock set by the test (GenerationPorts.clock):
 * the day's spend is the UTC day of the request's start, so the cap reached at 23:59:59 UTC refuses
 * (402, before the upstream), and the same key is served again at 00:00:00 UTC the next day.
 */
let sim: Awaited<ReturnType<typeof startSimulator>>;
let config: ReturnType<typeof loadCompletionsConfig>;
/** The default: per-key daily caps off (KEY_DAILY_CAPS unset). */
let configCapsOff: ReturnType<typeof loadCompletionsConfig>;
const KEY_CAPS_URL = 'https://example.test/dashboard/settings/api';
beforeAll(async () => {
  sim = await startSimulator({ port: 0 });
  configCapsOff = loadCompletionsConfig({ UPSTREAM_BASE_URL: sim.url, MAX_CONCURRENCY: '100' });
  config = loadCompletionsConfig({
    UPSTREAM_BASE_URL: sim.url,
    MAX_CONCURRENCY: '100',
    KEY_DAILY_CAPS: 'on',
    KEY_CAPS_URL,
  });
});
afterAll(async () => {
  await sim?.close();
});

const KEY_ID = 'key_0123456789abcdef';

async function cappedKey(capUsd: string | undefined) {
  const store = new MemoryStore();
  await store.createAccount('acct', usdToNano('100'), new Date().toISOString());
  store.keys.set('hash', {
    keyHash: 'hash',
    keyId: KEY_ID,
    accountId: 'acct',
    name: 'n',
    displayPrefix: 'p',
    status: 'active',
    createdAt: '',
  });
  if (capUsd !== undefined) await store.setKeyDailyCap('acct', KEY_ID, usdToNano(capUsd));
  return store;
}

/** One request at the clock's `at`: its status and body; upstream calls counted by the credential port. */
async function requestAt(
  store: MemoryStore,
  at: string,
  upstream: { calls: number },
  configUsed: ReturnType<typeof loadCompletionsConfig> = config,
) {
  const caller = authorize(await store.loadPrincipal('hash'), { requireCredit: true, topUpUrl: 'https://t' });
  const body = JSON.stringify({
    model: 'svc-fast',
    messages: [{ role: 'user', content: 'hi [[sim:tokens=5]]' }],
  });
  const settlements: Promise<void>[] = [];
  try {
    const result = await complete(
      { request: parseChatRequest(body), bodyBytes: body.length },
      { caller, requestId: 'r', remainingMs: 300_000, afterReply: (work) => settlements.push(work) },
      {
        store,
        config: configUsed,
        clock: () => Date.parse(at),
        credential: async () => {
          upstream.calls += 1;
          return undefined;
        },
      },
    );
    return { status: result.statusCode, body: JSON.parse(String(result.body)) as Record<string, unknown> };
  } catch (error) {
    if (!(error instanceof HttpError)) throw error;
    return {
      status: error.statusCode,
      body: error.toBody() as Record<string, unknown>,
      headers: error.headers,
    };
  } finally {
    await Promise.all(settlements);
  }
}

describe("a key's daily spend cap, with an injected clock", () => {
  it('refuses at 23:59:59 UTC once the day is spent, before the upstream, and serves again at 00:00:00 UTC', async () => {
    const store = await cappedKey('0.000001');
    const upstream = { calls: 0 };
    const first = await requestAt(store, '2030-06-30T23:59:58.000Z', upstream);
    expect(first.status).toBe(200);
    const callsServing = upstream.calls;
    expect(callsServing).toBeGreaterThan(0);
    // Its hold went on the key's counter and came off it with the settlement: the bill alone is left.
    const billed = usdToNano(String((first.body.usage as { cost: number }).cost));
    expect(await store.keyDailySpend('acct', KEY_ID, '2030-06-30')).toBe(billed);
    expect(store.holds.size).toBe(0);

    const refused = await requestAt(store, '2030-06-30T23:59:59.000Z', upstream);
    expect(refused.status).toBe(402);
    expect(refused.body).toEqual({
      error: 'Key daily spend cap reached',
      balance: Number(nanoToUsd(usdToNano('100') - billed)),
      message: `This API key's daily spend cap of 0.000001 USD is reached. It resets at 00:00 UTC (next: 2030-07-01T00:00:00.000Z). Raise or remove the cap at ${KEY_CAPS_URL}, or use another key.`,
      topUpUrl: config.topUpUrl,
    });
    expect(refused.headers).toMatchObject({ 'x-key-limit-reset': '2030-07-01T00:00:00.000Z' });
    // Refused before the upstream: no call, no hold, no charge.
    expect(upstream.calls).toBe(callsServing);
    expect((await store.listLedger('acct')).filter((e) => e.type === 'charge')).toHaveLength(1);

    const nextDay = await requestAt(store, '2030-07-01T00:00:00.000Z', upstream);
    expect(nextDay.status).toBe(200);
    expect(upstream.calls).toBeGreaterThan(callsServing);
    expect(await store.keyDailySpend('acct', KEY_ID, '2030-07-01')).toBeGreaterThan(0n);
  });

  it('costs a key without a cap no hold and no extra store call (a funded account stays on the fast path)', async () => {
    const store = await cappedKey(undefined);
    const served = await requestAt(store, '2030-06-30T23:59:58.000Z', { calls: 0 });
    expect(served.status).toBe(200);
    expect(store.calls).toEqual(['loadPrincipal', 'settleCharge']);
    // Its settlement still counts its day (GET /api/v1/key's usage_daily).
    expect(await store.keyDailySpend('acct', KEY_ID, '2030-06-30')).toBeGreaterThan(0n);
  });

  it('holds every request of a capped key, however large its cap, and takes the hold off the counter with the settlement', async () => {
    const store = await cappedKey('1000');
    const served = await requestAt(store, '2030-06-30T12:00:00.000Z', { calls: 0 });
    expect(served.status).toBe(200);
    expect(store.calls).toContain('placeHold');
    expect(store.holds.size).toBe(0);
    const billed = usdToNano(String((served.body.usage as { cost: number }).cost));
    expect(await store.keyDailySpend('acct', KEY_ID, '2030-06-30')).toBe(billed);
  });
});

describe('with per-key daily caps off (the default)', () => {
  it('reads no cap: a key whose stored cap is spent today is served on the fast path and charged', async () => {
    expect(configCapsOff.keyDailyCaps).toBe(false);
    const store = await cappedKey('0.000001');
    const first = await requestAt(store, '2030-06-30T12:00:00.000Z', { calls: 0 }, configCapsOff);
    expect(first.status).toBe(200);
    const spent = await store.keyDailySpend('acct', KEY_ID, '2030-06-30');
    // Past the stored cap today: with caps on this key would be refused (the test above).
    expect(spent).toBeGreaterThan(usdToNano('0.000001'));
    store.calls.length = 0;
    const upstream = { calls: 0 };
    const second = await requestAt(store, '2030-06-30T12:00:01.000Z', upstream, configCapsOff);
    expect(second.status).toBe(200);
    expect(upstream.calls).toBeGreaterThan(0);
    // No hold: a funded key takes the fast path, its cap unread.
    expect(store.calls).toEqual(['loadPrincipal', 'settleCharge']);
    const billed = usdToNano(String((second.body.usage as { cost: number }).cost));
    const firstBilled = usdToNano(String((first.body.usage as { cost: number }).cost));
    expect((await store.getAccount('acct'))?.balanceNano).toBe(usdToNano('100') - firstBilled - billed);
    // The stored cap is kept, not deleted.
    expect(store.keys.get('hash')?.dailyCapNano).toBe(usdToNano('0.000001'));
  });
});
