import OpenAI, { APIError, AuthenticationError, PermissionDeniedError } from 'openai';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { GENERATION_ID_PATTERN } from '../../functions/core/ids.js';
import { usdToNano } from '../../functions/core/money.js';
import { revokeKey, setAccountStatus } from '../../lib/admin/operations.js';
import { type ContractLog, contractProblems, newContractLog, validatingFetch } from '../support/contract.js';
import { balanceNano, newAccount, startTarget, type Target } from '../support/target.js';

/**
 * The official `openai` client against the running service (the local emulator by default, a
 * deployed stack with SVC_BASE_URL): only the base URL and the key change.
 */
let target: Target;
beforeAll(async () => {
  target = await startTarget({ adminAs: 'ciSuite' });
});
afterAll(async () => {
  await target?.stop();
});

// Every body and chunk these tests receive is also checked against OpenAI's schemas.
let log: ContractLog;
beforeEach(() => {
  log = newContractLog();
});
afterEach(async () => {
  expect(await contractProblems(log)).toEqual([]);
});

const client = (apiKey: string) =>
  new OpenAI({ baseURL: target.baseUrl, apiKey, maxRetries: 0, fetch: validatingFetch(log) });
const costNano = (cost: unknown) => usdToNano(String(cost));

describe('the official openai client', () => {
  it('lists exactly the three tiers', async () => {
    const { key } = await newAccount(target);
    const models = await client(key).models.list();
    expect(models.data.map((m) => m.id)).toEqual(['svc-fast', 'svc-pro', 'svc-heavy']);
    for (const model of models.data) {
      expect(model.object).toBe('model');
      expect(typeof model.created).toBe('number');
      expect(model.owned_by).toBeTruthy();
      expect((model as unknown as { display_name: string }).display_name).toBeTruthy();
    }
  });

  it('gets a completion whose usage.cost is exactly the drop in creditBalance', async () => {
    const { accountId, key } = await newAccount(target);
    const before = await balanceNano(target, accountId);
    const completion = await client(key).chat.completions.create({
      model: 'svc-pro',
      messages: [{ role: 'user', content: 'Say hello [[sim:tokens=12]]' }],
    });
    expect(completion.id).toMatch(GENERATION_ID_PATTERN);
    expect(completion.object).toBe('chat.completion');
    expect(completion.model).toBe('svc-pro');
    expect(completion.choices[0]?.message.role).toBe('assistant');
    expect(completion.choices[0]?.finish_reason).toBe('stop');
    const usage = completion.usage as OpenAI.CompletionUsage & { cost: number };
    expect(usage.completion_tokens).toBe(12);
    expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens);
    expect(costNano(usage.cost)).toBeGreaterThan(0n);
    expect(before - (await balanceNano(target, accountId))).toBe(costNano(usage.cost));
  });

  it('streams chunks with one id, the last with the finish and a usage whose cost is the drop in creditBalance', async () => {
    const { accountId, key } = await newAccount(target);
    const before = await balanceNano(target, accountId);
    const stream = await client(key).chat.completions.create({
      model: 'svc-fast',
      messages: [{ role: 'user', content: 'Count [[sim:tokens=20]]' }],
      stream: true,
    });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const ids = new Set(chunks.map((c) => c.id));
    expect(ids.size).toBe(1);
    expect([...ids][0]).toMatch(GENERATION_ID_PATTERN);
    expect(chunks.every((c) => c.model === 'svc-fast' && c.object === 'chat.completion.chunk')).toBe(true);
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(text.length).toBeGreaterThan(0);
    // No include_usage asked: the usage rides on the finish chunk, every chunk with a choice.
    expect(chunks.every((c) => c.choices.length === 1)).toBe(true);
    const last = chunks.at(-1);
    expect(last?.choices[0]?.finish_reason).toBe('stop');
    const usage = last?.usage as OpenAI.CompletionUsage & { cost: number };
    expect(usage.completion_tokens).toBe(20);
    expect(chunks.filter((c) => c.usage).length).toBe(1);
    expect(before - (await balanceNano(target, accountId))).toBe(costNano(usage.cost));
  });

  it('gets a stream gzip-compressed, as it asks for, and each chunk as soon as it is generated', async () => {
    const { key } = await newAccount(target);
    // The simulator pauses 1.5 s after the 3rd token: compression must not hold the first ones back.
    const started = Date.now();
    const { data: stream, response } = await client(key)
      .chat.completions.create({
        model: 'svc-fast',
        messages: [
          { role: 'user', content: 'Count [[sim:tokens=8]] [[sim:pause_after=3]] [[sim:pause_ms=1500]]' },
        ],
        stream: true,
      })
      .withResponse();
    expect(response.headers.get('content-encoding')).toBe('gzip');
    expect(response.headers.get('vary')).toMatch(/accept-encoding/i);
    let firstText: number | undefined;
    let text = '';
    for await (const chunk of stream) {
      const piece = chunk.choices[0]?.delta.content ?? '';
      if (piece && firstText === undefined) firstText = Date.now() - started;
      text += piece;
    }
    const total = Date.now() - started;
    expect(text.length).toBeGreaterThan(0);
    expect(firstText).toBeDefined();
    expect(total - (firstText ?? total)).toBeGreaterThan(1_000);
  });

  it('sends the stream uncompressed to a client that does not ask for gzip', async () => {
    const { key } = await newAccount(target);
    const response = await fetch(`${target.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        'accept-encoding': 'identity',
      },
      body: JSON.stringify({
        model: 'svc-fast',
        messages: [{ role: 'user', content: 'Count [[sim:tokens=5]]' }],
        stream: true,
      }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-encoding')).toBeNull();
    const body = await response.text();
    expect(body).toContain('"chat.completion.chunk"');
    expect(body.trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it('raises AuthenticationError for a revoked key, on its very next request', async () => {
    const { key, keyId } = await newAccount(target);
    await client(key).models.list();
    await revokeKey(target.admin, keyId);
    await expect(client(key).models.list()).rejects.toBeInstanceOf(AuthenticationError);
    await expect(
      client(key).chat.completions.create({ model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }] }),
    ).rejects.toBeInstanceOf(AuthenticationError);
  });

  it('raises PermissionDeniedError for a suspended account, and serves it again once reinstated', async () => {
    const { accountId, key } = await newAccount(target);
    await setAccountStatus(target.admin, accountId, 'suspended');
    const error = await client(key)
      .chat.completions.create({ model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermissionDeniedError);
    expect((error as PermissionDeniedError).message).toContain('suspended');
    await setAccountStatus(target.admin, accountId, 'active');
    const ok = await client(key).chat.completions.create({
      model: 'svc-fast',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(ok.choices).toHaveLength(1);
  });

  it('raises an APIError with status 402 and the spec body for an empty balance', async () => {
    const { key } = await newAccount(target, '0');
    const error = await client(key)
      .chat.completions.create({ model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(APIError);
    const apiError = error as APIError;
    expect(apiError.status).toBe(402);
    // The SDK keeps the body's `error` field; the flat body itself is checked over plain HTTP.
    expect(apiError.error).toBe('Insufficient credits');
    const response = await fetch(`${target.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(response.status).toBe(402);
    const body = (await response.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['balance', 'error', 'message', 'topUpUrl']);
    expect(body.balance).toBe(0);
    expect(String(body.message)).toContain(String(body.topUpUrl));
  });
});
