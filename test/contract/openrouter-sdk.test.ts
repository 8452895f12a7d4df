import { OpenRouter } from '@openrouter/sdk';
import { OpenRouterError } from '@openrouter/sdk/models/errors';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usdToNano } from '../../functions/core/money.js';
import { ledgerOf } from '../support/settled.js';
import { eventually } from '../support/sse.js';
import { getWithKey, newAccount, startTarget, type Target } from '../support/target.js';

/**
 * OpenRouter's own SDK (`@openrouter/sdk`, which validates every reply against its schemas) reads a
 * generation and the calling key here as it reads them at OpenRouter (docs/compatibility.md,
 * "Customers see their money"). Runs against the local stack or, with SVC_BASE_URL, a deployed one.
 */
let target: Target;
beforeAll(async () => {
  target = await startTarget({ adminAs: 'ciSuite' });
});
afterAll(async () => {
  await target?.stop();
});

const openRouter = (key: string) =>
  new OpenRouter({ apiKey: key, serverURL: target.baseUrl, retryConfig: { strategy: 'none' } });
const openAi = (key: string) => new OpenAI({ baseURL: target.baseUrl, apiKey: key, maxRetries: 0 });

/** A USD number of a reply, as the integer nano-USD it stands for. */
const nano = (usd: number) => usdToNano(String(usd));

/** The ledger's charge of generation `id`, once it is settled. */
const chargeOf = (accountId: string, id: string) =>
  eventually(async () => (await ledgerOf(target, accountId)).find((e) => e.entryId === id));

describe("the OpenRouter SDK's generations.getGeneration", () => {
  it('reads a reply and a stream: the cost the ledger billed, exactly, and the tokens of the reply', async () => {
    const { accountId, key } = await newAccount(target);
    const client = openAi(key);
    const reply = await client.chat.completions.create({
      model: 'svc-fast',
      messages: [{ role: 'user', content: 'hi [[sim:tokens=7]]' }],
    });
    let streamed: { id: string; usage: OpenAI.CompletionUsage | null | undefined } = {
      id: '',
      usage: undefined,
    };
    for await (const chunk of await client.chat.completions.create({
      model: 'svc-pro',
      messages: [{ role: 'user', content: 'hello there [[sim:tokens=11]]' }],
      stream: true,
      stream_options: { include_usage: true },
    }))
      streamed = { id: chunk.id, usage: chunk.usage ?? streamed.usage };

    for (const [generation, model, usage, finish] of [
      [reply.id, 'svc-fast', reply.usage, reply.choices[0]?.finish_reason],
      [streamed.id, 'svc-pro', streamed.usage, 'stop'],
    ] as const) {
      const charge = await chargeOf(accountId, generation);
      const { data } = await openRouter(key).generations.getGeneration({ id: generation });
      expect(data).toMatchObject({
        id: generation,
        model,
        createdAt: charge.createdAt,
        finishReason: finish,
        isByok: false,
        apiType: 'completions',
      });
      expect(nano(data.totalCost)).toBe(-charge.deltaNano);
      expect(nano(data.usage)).toBe(-charge.deltaNano);
      expect(data.tokensPrompt).toBe(usage?.prompt_tokens);
      expect(data.tokensCompletion).toBe(usage?.completion_tokens);
      expect(data.nativeTokensPrompt).toBe(usage?.prompt_tokens);
      expect(data.nativeTokensCompletion).toBe(usage?.completion_tokens);
    }
    expect(reply.usage?.completion_tokens).toBe(7);
    expect(streamed.usage?.completion_tokens).toBe(11);
  });

  it("is a 404 in OpenAI's shape for an id that is not one of the account's generations", async () => {
    const owner = await newAccount(target);
    const other = await newAccount(target);
    const reply = await openAi(owner.key).chat.completions.create({
      model: 'svc-fast',
      messages: [{ role: 'user', content: 'mine [[sim:tokens=2]]' }],
    });
    await chargeOf(owner.accountId, reply.id);
    for (const [key, id] of [
      [other.key, reply.id],
      [owner.key, 'gen-nope'],
      [owner.key, 'gen-1767225600-NotAGenerationOfOurs'],
    ] as const) {
      const error = await openRouter(key)
        .generations.getGeneration({ id })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      // The SDK's NotFoundResponseError wants OpenRouter's numeric `code`: an OpenAI-shaped error is
      // raised as its base class (a ResponseValidationError), with the status and body.
      if (!(error instanceof OpenRouterError)) throw error;
      expect(error.statusCode, id).toBe(404);
      expect(JSON.parse(error.body), id).toEqual({
        error: {
          message: `No generation ${id} on this account.`,
          type: 'invalid_request_error',
          param: null,
          code: 'not_found',
        },
      });
    }
  });
});

describe("the OpenRouter SDK's apiKeys.getCurrentKeyMetadata", () => {
  it("reads the calling key: its label and what it spent, exactly as the ledger's charges", async () => {
    const { accountId, key, keyId } = await newAccount(target);
    for (const tokens of [3, 5])
      await openAi(key).chat.completions.create({
        model: 'svc-fast',
        messages: [{ role: 'user', content: `hi [[sim:tokens=${tokens}]]` }],
      });
    const charges = (await ledgerOf(target, accountId)).filter((e) => e.type === 'charge');
    expect(charges).toHaveLength(2);
    const spent = charges.reduce((sum, e) => sum - e.deltaNano, 0n);
    expect(charges.every((e) => e.keyId === keyId)).toBe(true);

    const { data } = await openRouter(key).apiKeys.getCurrentKeyMetadata();
    expect(data).toMatchObject({
      label: 'test',
      limit: null,
      limitRemaining: null,
      limitReset: null,
      isFreeTier: false,
      isManagementKey: false,
      isProvisioningKey: false,
      byokUsage: 0,
      includeByokInLimit: false,
    });
    expect(nano(data.usage)).toBe(spent);
    expect(spent).toBeGreaterThan(0n);
  });

  it("answers the same at OpenRouter's older path, /auth/key", async () => {
    const { key } = await newAccount(target);
    const current = await getWithKey(target, '/key', key);
    const older = await getWithKey(target, '/auth/key', key);
    expect(older.status).toBe(200);
    expect(older.body).toEqual(current.body);
    expect((await fetch(`${target.baseUrl}/auth/key`)).status).toBe(401);
  });
});
