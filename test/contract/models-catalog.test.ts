import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTarget, type Target } from '../support/target.js';

/** `/models` says what a tool can plan with: each tier's context length and prices (OpenRouter's names). */
let target: Target;
beforeAll(async () => {
  target = await startTarget({ adminAs: 'ciSuite' });
});
afterAll(async () => {
  await target?.stop();
});

describe('GET /api/v1/models', () => {
  it('gives every tier a context length and per-token USD prices, on the list and on one model', async () => {
    const { key } = await newAccount(target);
    const get = async (path: string) =>
      (
        await fetch(`${target.baseUrl}${path}`, { headers: { authorization: `Bearer ${key}` } })
      ).json() as Promise<Record<string, unknown>>;
    const list = (await get('/models')) as { data: Record<string, unknown>[] };
    expect(list.data).toHaveLength(3);
    for (const model of list.data) {
      expect(model).toMatchObject({ object: 'model', owned_by: expect.any(String) });
      expect(Number.isSafeInteger(model.context_length) && (model.context_length as number) > 0).toBe(true);
      const pricing = model.pricing as Record<string, string>;
      for (const field of ['prompt', 'completion', 'input_cache_read', 'request'])
        expect(pricing[field]).toMatch(/^\d+(\.\d+)?$/);
      expect(await get(`/models/${String(model.id)}`)).toEqual(model);
    }
    if (target.local) {
      // The local stack's simulator tiers: the product's svc-fast rates, per token.
      const fast = list.data.find((m) => m.id === 'svc-fast');
      expect(fast?.pricing).toMatchObject({ prompt: '0.00000035', completion: '0.00000143' });
    }
  });
});
