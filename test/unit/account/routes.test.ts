import { describe, expect, it } from 'vitest';
import { answer } from '../../../functions/account/routes.js';
import { stringifyJson } from '../../../functions/billing/usage.js';
import type { Principal } from '../../../functions/core/access.js';
import { generateApiKey } from '../../../functions/core/auth.js';
import { HttpError } from '../../../functions/core/errors.js';
import type { AccountRecord, KeyRecord, LedgerEntry } from '../../../functions/core/store.js';
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
};

async function get(path: string, query?: Record<string, string>) {
  const e = event(path, 'GET', query);
  return JSON.parse(stringifyJson(await answer(routeOf(e, 'models'), { event: e, caller, store })));
}

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

  it("answers the caller's key in OpenRouter's shape, its usage exact", async () => {
    expect(await get('/api/v1/key')).toEqual({
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
      },
    });
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
    await expect(get('/api/v1/generation', { id: 'nope' })).rejects.toMatchObject({ statusCode: 400 });
  });
});
