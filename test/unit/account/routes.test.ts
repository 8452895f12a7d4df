import { generationResponseFromJSON } from '@openrouter/sdk/models';
import { getCurrentKeyResponseFromJSON } from '@openrouter/sdk/models/operations';
import { describe, expect, it } from 'vitest';
import { answer } from '../../../functions/account/routes.js';
import type { Principal } from '../../../functions/core/access.js';
import { generateApiKey } from '../../../functions/core/auth.js';
import { HttpError } from '../../../functions/core/errors.js';
import type { AccountRecord, KeyRecord, LedgerEntry } from '../../../functions/core/store.js';
import { stringifyJson } from '../../../functions/core/usage.js';
import type { FunctionUrlEvent } from '../../../functions/shared/http.js';
import { routeOf } from '../../../functions/shared/routing.js';

function event(path: string, method = 'GET', query?: Record<string, string>): FunctionUrlEvent {
  return {
    rawPath: path,
    headers: { authorization: `Bearer ${key.key}` },
    requestContext: { http: { method } },
    ...(query ? { queryStringParameters: query } : {}),
  } as unknown as FunctionUrlEvent;
}

const caller: Principal = {
  keyId: 'key_1',
  accountId: 'acct-1',
  keyStatus: 'active',
  accountStatus: 'active',
  balanceNano: 1_875_000_000n,
  heldNano: 0n,
  slice: 2,
};

const charge: LedgerEntry = {
  entryId: 'gen-1767225600-AAAAAAAAAAAAAAAAAAAA',
  type: 'charge',
  createdAt: '2026-01-01T00:00:00.000Z',
  deltaNano: -1234n,
  tier: 'svc-pro',
  promptTokens: 10,
  completionTokens: 5,
  cachedTokens: 2,
  estimated: false,
  finishReason: 'stop',
};
const key = generateApiKey();
const store = {
  getLedgerEntry: async (accountId: string, entryId: string) =>
    accountId === 'acct-1' && entryId === charge.entryId ? charge : undefined,
  // The whole account (its slices summed): the caller's read saw one slice of it.
  getAccount: async (accountId: string): Promise<AccountRecord> => ({
    accountId,
    status: 'active',
    balanceNano: 7_500_000_000n,
    heldNano: 500_000_000n,
    slices: 4,
  }),
  totalCredits: async () => 10_000_000_000n,
  getKey: async (keyHash: string): Promise<KeyRecord | undefined> =>
    keyHash === key.keyHash
      ? {
          keyHash,
          keyId: 'key_1',
          accountId: 'acct-1',
          name: 'ci runner',
          displayPrefix: key.displayPrefix,
          status: 'active',
          createdAt: '2026-01-02T03:04:05.000Z',
        }
      : undefined,
  keyUsage: async (accountId: string, keyId: string) =>
    accountId === 'acct-1' && keyId === 'key_1' ? 1_234_567_891n : 0n,
  // The key's day counters summed over the slices: what it committed that UTC day.
  keyDailySpend: async (accountId: string, keyId: string, day: string) =>
    accountId === 'acct-1' && keyId === 'key_1' && day === '2026-03-04' ? 250_000_001n : 0n,
};
/** The account function's clock in these tests: 2026-03-04T22:30:00Z. */
const NOW = Date.parse('2026-03-04T22:30:00.000Z');

async function getText(path: string, query?: Record<string, string>) {
  const e = event(path, 'GET', query);
  return stringifyJson(await answer(routeOf(e, 'models'), { event: e, caller, store, now: () => NOW }));
}
const get = async (path: string, query?: Record<string, string>) => JSON.parse(await getText(path, query));

function statusOf(run: () => unknown): number | undefined {
  try {
    run();
  } catch (error) {
    return error instanceof HttpError ? error.statusCode : -1;
  }
  return undefined;
}

describe('the account function route table', () => {
  it('lists exactly the three tiers, and one at /models/{id}, trailing slash or not', async () => {
    const list = await get('/api/v1/models/');
    expect(list.data.map((m: { id: string }) => m.id)).toEqual(['svc-fast', 'svc-pro', 'svc-heavy']);
    expect(await get('/api/v1/models/svc-pro')).toMatchObject({ id: 'svc-pro', object: 'model' });
  });

  it('is 404 for an unknown model, the announced endpoints and any other path; 405 for another method', async () => {
    await expect(get('/api/v1/models/gpt-4o')).rejects.toMatchObject({ statusCode: 404 });
    for (const path of ['/api/v1/agent/run', '/api/v1/memory/query', '/api/v1/modelsx', '/'])
      expect(statusOf(() => routeOf(event(path), 'models'))).toBe(404);
    expect(statusOf(() => routeOf(event('/api/v1/credits', 'POST'), 'models'))).toBe(405);
  });

  it("answers the caller's credits: balance, held, available of the whole account, and OpenRouter's data", async () => {
    expect(await get('/api/v1/credits')).toEqual({
      object: 'credits',
      balance: 7.5,
      held: 0.5,
      available: 7,
      currency: 'USD',
      data: { total_credits: 10, total_usage: 2.5 },
    });
  });

  it("answers the caller's key in OpenRouter's shape, its usage exact, at /key and at /auth/key", async () => {
    const expected = {
      data: {
        label: 'ci runner',
        usage: 1.234567891,
        limit: null,
        limit_remaining: null,
        limit_reset: null,
        is_free_tier: false,
        is_management_key: false,
        expires_at: null,
        created_at: '2026-01-02T03:04:05.000Z',
        usage_daily: 0.250000001,
        usage_weekly: 0,
        usage_monthly: 0,
        byok_usage: 0,
        byok_usage_daily: 0,
        byok_usage_weekly: 0,
        byok_usage_monthly: 0,
        include_byok_in_limit: false,
        is_provisioning_key: false,
        creator_user_id: null,
        organization_id: null,
        workspace_id: null,
        allowed_data_regions: ['global'],
        free_model_daily_requests: { limit: 0, remaining: 0, used: 0 },
        rate_limit: { requests: -1, interval: '10s', note: 'This field is deprecated and safe to ignore.' },
      },
    };
    expect(await get('/api/v1/key')).toEqual(expected);
    expect(await get('/api/v1/auth/key/')).toEqual(expected);
  });

  it("answers a capped key's daily cap in OpenRouter's fields: limit, limit_remaining today, limit_reset daily", async () => {
    const capped = (dailyCapNano: bigint) => ({
      ...store,
      getKey: async (keyHash: string) => {
        const found = await store.getKey(keyHash);
        return found ? { ...found, dailyCapNano } : undefined;
      },
    });
    const keyOf = async (dailyCapNano: bigint, now = NOW) => {
      const e = event('/api/v1/key');
      const body = stringifyJson(
        await answer(routeOf(e, 'models'), {
          event: e,
          caller,
          store: capped(dailyCapNano),
          now: () => now,
          keyDailyCaps: true,
        }),
      );
      return JSON.parse(body).data;
    };
    // $1 a day, $0.250000001 committed today: $0.749999999 left, reset daily (at 00:00 UTC).
    expect(await keyOf(1_000_000_000n)).toMatchObject({
      limit: 1,
      limit_remaining: 0.749999999,
      limit_reset: 'daily',
      usage_daily: 0.250000001,
    });
    // Past the cap (the bound lets it pass by at most a request per slice): never below 0.
    expect(await keyOf(200_000_000n)).toMatchObject({ limit: 0.2, limit_remaining: 0, limit_reset: 'daily' });
    // The next UTC day: nothing committed yet, the whole cap left.
    expect(await keyOf(1_000_000_000n, Date.parse('2026-03-05T00:00:00.000Z'))).toMatchObject({
      limit: 1,
      limit_remaining: 1,
      usage_daily: 0,
    });
    const e = event('/api/v1/key');
    const parsed = getCurrentKeyResponseFromJSON(
      stringifyJson(
        await answer(routeOf(e, 'models'), {
          event: e,
          caller,
          store: capped(1_000_000_000n),
          now: () => NOW,
          keyDailyCaps: true,
        }),
      ),
    );
    if (!parsed.ok) throw parsed.error;
    expect(parsed.value.data).toMatchObject({ limit: 1, limitRemaining: 0.749999999, limitReset: 'daily' });
  });

  it('states no cap while per-key daily caps are off (the default), whatever the key item stores', async () => {
    const storedCap = {
      ...store,
      getKey: async (keyHash: string) => {
        const found = await store.getKey(keyHash);
        return found ? { ...found, dailyCapNano: 1_000_000_000n } : undefined;
      },
    };
    const e = event('/api/v1/key');
    const data = JSON.parse(
      stringifyJson(
        await answer(routeOf(e, 'models'), { event: e, caller, store: storedCap, now: () => NOW }),
      ),
    ).data;
    expect(data).toMatchObject({
      limit: null,
      limit_remaining: null,
      limit_reset: null,
      usage_daily: 0.250000001,
    });
  });

  it("answers the key in a body the OpenRouter SDK's own schema takes", async () => {
    const parsed = getCurrentKeyResponseFromJSON(await getText('/api/v1/key'));
    if (!parsed.ok) throw parsed.error;
    expect(parsed.value.data).toMatchObject({ label: 'ci runner', usage: 1.234567891, limit: null });
  });

  it("answers the caller's own generation by id, with created from the generation's own time", async () => {
    expect(await get('/api/v1/generation', { id: charge.entryId })).toMatchObject({
      id: charge.entryId,
      object: 'generation',
      model: 'svc-pro',
      created: 1_767_225_600,
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, cost: 0.000001234 },
    });
    await expect(get('/api/v1/generation', { id: 'gen-1767225600-BBBB' })).rejects.toMatchObject({
      statusCode: 404,
    });
    await expect(get('/api/v1/generation')).rejects.toMatchObject({ statusCode: 400, param: 'id' });
  });

  it.each(['nope', 'gen-nope', 'gen-1767225600-BBBB', `gen-${'9'.repeat(400)}`])(
    "is 404 in OpenAI's shape for an id that is not one of its generations (%s), as OpenRouter answers it",
    async (id) => {
      const error = await get('/api/v1/generation', { id }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(HttpError);
      expect((error as HttpError).toBody()).toEqual({
        error: {
          message: expect.stringMatching(/^No generation gen-|^No generation nope/),
          type: 'invalid_request_error',
          param: null,
          code: 'not_found',
        },
      });
      expect((error as HttpError).statusCode).toBe(404);
      expect((error as HttpError).message.length).toBeLessThan(200);
    },
  );

  it("answers a generation in OpenRouter's shape in data, which the OpenRouter SDK's own schema takes", async () => {
    const text = await getText('/api/v1/generation', { id: charge.entryId });
    const parsed = generationResponseFromJSON(text);
    if (!parsed.ok) throw parsed.error;
    expect(parsed.value.data).toMatchObject({
      id: charge.entryId,
      model: 'svc-pro',
      createdAt: '2026-01-01T00:00:00.000Z',
      totalCost: 0.000001234,
      usage: 0.000001234,
      tokensPrompt: 10,
      tokensCompletion: 5,
      nativeTokensPrompt: 10,
      nativeTokensCompletion: 5,
      nativeTokensCached: 2,
      finishReason: 'stop',
      isByok: false,
      streamed: null,
      latency: null,
      providerName: null,
    });
    // The cost exactly as the ledger holds it, in both places.
    expect(text).toContain('"total_cost":0.000001234');
    expect(text).toContain('"cost":0.000001234');
  });
});
