import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usdToNano } from '../../functions/core/money.js';
import { showAccount } from '../../lib/admin/operations.js';
import { ledgerOf, settled } from '../support/settled.js';
import { eventually } from '../support/sse.js';
import { getWithKey, newAccount, startTarget, type Target } from '../support/target.js';

/**
 * Customers see their money with their own key only (docs/compatibility.md): GET /api/v1/credits and
 * GET /api/v1/generation?id=. Runs against the local stack or, with SVC_BASE_URL, a deployed one.
 */
let target: Target;
beforeAll(async () => {
  target = await startTarget({ adminAs: 'ciSuite' });
});
afterAll(async () => {
  await target?.stop();
});

const get = (path: string, key: string) => getWithKey(target, path, key);

describe('GET /api/v1/credits', () => {
  it('equals admin account show, and moves with a charge', async () => {
    const { accountId, key } = await newAccount(target, '7.5');
    const first = await get('/credits', key);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      object: 'credits',
      currency: 'USD',
      balance: 7.5,
      available: 7.5,
      held: 0,
    });
    await new OpenAI({ baseURL: target.baseUrl, apiKey: key, maxRetries: 0 }).chat.completions.create({
      model: 'svc-fast',
      messages: [{ role: 'user', content: 'hi [[sim:tokens=4]]' }],
    });
    // The reply comes before its settlement.
    await settled(target);
    const shown = await showAccount(target.admin, accountId);
    const after = await get('/credits', key);
    expect(after.body.balance).toBe(shown.creditBalance);
    expect(after.body.balance).toBeLessThan(7.5);
  });

  it('needs a valid key: 401 without one, 401 for a revoked one', async () => {
    expect((await fetch(`${target.baseUrl}/credits`)).status).toBe(401);
    expect((await get('/credits', `svc_live_${'x'.repeat(43)}`)).status).toBe(401);
  });
});

describe('GET /api/v1/generation', () => {
  it('returns the ledger entry of a stream the client abandoned, with the cost the ledger holds', async () => {
    const { accountId, key } = await newAccount(target);
    const controller = new AbortController();
    const response = await fetch(`${target.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'long [[sim:tokens=30]] [[sim:delay_ms=20]]' }],
        stream: true,
        user: 'end-user-7',
      }),
      signal: controller.signal,
    });
    const id = response.headers.get('x-generation-id') ?? '';
    await response.body?.getReader().read();
    controller.abort(); // the client goes away; the generation runs on and is billed
    const charge = await eventually(async () =>
      (await ledgerOf(target, accountId)).find((e) => e.entryId === id),
    );
    const { status, body } = await get(`/generation?id=${id}`, key);
    expect(status).toBe(200);
    expect(body).toMatchObject({
      id,
      object: 'generation',
      model: 'svc-pro',
      finish_reason: 'stop',
      estimated: false,
      user: 'end-user-7',
      usage: { completion_tokens: 30 },
    });
    expect(usdToNano(String((body.usage as { cost: number }).cost))).toBe(-charge.deltaNano);
  });

  it("is 404 for another account's generation, and 400 without an id", async () => {
    const owner = await newAccount(target);
    const other = await newAccount(target);
    const completion = await new OpenAI({
      baseURL: target.baseUrl,
      apiKey: owner.key,
      maxRetries: 0,
    }).chat.completions.create({
      model: 'svc-fast',
      messages: [{ role: 'user', content: 'mine [[sim:tokens=3]]' }],
    });
    expect((await get(`/generation?id=${completion.id}`, owner.key)).status).toBe(200);
    const foreign = await get(`/generation?id=${completion.id}`, other.key);
    expect(foreign.status).toBe(404);
    expect(foreign.body).toMatchObject({ error: { type: 'invalid_request_error' } });
    const missing = await get('/generation', owner.key);
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({ error: { param: 'id', code: 'missing_required_parameter' } });
  });
});
