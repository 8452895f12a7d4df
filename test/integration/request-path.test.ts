import { QueryCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usdToNano } from '../../functions/core/money.js';
import { inProcessLauncher } from '../../lib/local/emulator.js';
import { watchDynamoCalls } from '../support/dynamo-calls.js';
import { settled } from '../support/settled.js';
import { balanceNano, newAccount, startTarget, type Target } from '../support/target.js';

/** The request path through the Function URL emulator, against DynamoDB Local and the simulator. */
let target: Target;
let key: string;
let accountId: string;
beforeAll(async () => {
  // The functions run in this thread (inProcessLauncher): the tests reach into their own SDK clients.
  target = await startTarget({ launcher: inProcessLauncher });
  ({ key, accountId } = await newAccount(target, '5'));
});
afterAll(async () => {
  await target?.stop();
});

function post(
  body: unknown,
  headers: Record<string, string> = { authorization: `Bearer ${key}` },
  path = '/chat/completions',
) {
  return fetch(`${target.baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}
const hello = { model: 'svc-fast', messages: [{ role: 'user', content: 'hello' }] };

/** The account's charge items in the ledger, as stored. */
async function chargesOf(accountId: string) {
  // The reply comes before its settlement: read once the invocation is done.
  await settled(target);
  const ledger = await target.client.send(
    new QueryCommand({
      TableName: target.tables.ledger,
      KeyConditionExpression: 'accountId = :a',
      ExpressionAttributeValues: { ':a': { S: accountId } },
    }),
  );
  return (ledger.Items ?? []).filter((item) => item.type?.S === 'charge');
}

async function expectOpenAiError(response: Response, status: number) {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toBe('application/json');
  const body = (await response.json()) as { error: Record<string, unknown> };
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(typeof body.error.message).toBe('string');
  return body.error;
}

describe('authentication comes first', () => {
  it('answers 401 for a missing, malformed or unknown key', async () => {
    await expectOpenAiError(await post(hello, {}), 401);
    await expectOpenAiError(await post(hello, { authorization: 'Bearer nope' }), 401);
    await expectOpenAiError(await post(hello, { authorization: `Bearer svc_live_${'x'.repeat(43)}` }), 401);
  });

  it('rejects a malformed key without any database read', async () => {
    let calls = 0;
    const stop = watchDynamoCalls(() => {
      calls += 1;
    });
    try {
      await expectOpenAiError(await post(hello, { authorization: 'Bearer svc_live_tooshort' }), 401);
      expect(calls).toBe(0);
      await expectOpenAiError(await post(hello, { authorization: `Bearer svc_live_${'y'.repeat(43)}` }), 401);
      expect(calls).toBeGreaterThan(0);
    } finally {
      stop();
    }
  });

  it('reports a bad key before a bad body, and an empty balance before a bad body', async () => {
    await expectOpenAiError(await post('{broken', { authorization: 'Bearer nope' }), 401);
    // A body too large to be parsed while the key is read is parsed after it: the same answers.
    const large = `{"broken": "${'x'.repeat(100_000)}`;
    await expectOpenAiError(await post(large, { authorization: 'Bearer nope' }), 401);
    expect((await expectOpenAiError(await post(large), 400)).code).toBe('invalid_json');
    const broke = await newAccount(target, '0');
    const response = await post('{broken', { authorization: `Bearer ${broke.key}` });
    expect(response.status).toBe(402);
  });
});

describe('body validation', () => {
  it.each([
    ['an unknown model', { ...hello, model: 'gpt-4o' }, 'model'],
    ['missing messages', { model: 'svc-fast' }, 'messages'],
    ['temperature above 2', { ...hello, temperature: 2.1 }, 'temperature'],
    ['max_tokens of 0', { ...hello, max_tokens: 0 }, 'max_tokens'],
    ['a field of the wrong type', { ...hello, temperature: 'hot' }, 'temperature'],
    [
      'a tool message without tool_call_id',
      { ...hello, messages: [{ role: 'tool', content: 'x' }] },
      'messages[0].tool_call_id',
    ],
  ])('answers 400 for %s, naming the field', async (_name, body, param) => {
    const before = await balanceNano(target, accountId);
    const error = await expectOpenAiError(await post(body), 400);
    expect(error.param).toBe(param);
    expect(String(error.message)).toContain(param);
    expect(await balanceNano(target, accountId)).toBe(before);
  });

  it('answers 400 for a body that is not JSON', async () => {
    const error = await expectOpenAiError(await post('{not json'), 400);
    expect(error.code).toBe('invalid_json');
  });

  it('accepts tool-call history, array content and tools', async () => {
    const response = await post({
      model: 'svc-heavy',
      messages: [
        { role: 'system', content: [{ type: 'text', text: 'You are terse.' }] },
        { role: 'user', content: 'Weather in Paris?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              id: 'call_1',
              type: 'function',
              function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
            },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: '{"temp":21}' },
      ],
      tools: [
        {
          type: 'function',
          function: {
            name: 'get_weather',
            parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
          },
        },
      ],
      tool_choice: 'auto',
      temperature: 0.5,
      max_tokens: 50,
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { choices: { message: { content: string } }[] };
    expect(body.choices[0]?.message.content).toBeTruthy();
  });
});

describe('routing', () => {
  it('answers 404 for unknown paths and for the announced endpoints of spec 4.3', async () => {
    for (const [method, path] of [
      ['POST', '/api/v1/agent/run'],
      ['POST', '/api/v1/memory/store'],
      ['GET', '/api/v1/memory/query'],
      ['GET', '/api/v1/nothing'],
      ['GET', '/api/v2/models'],
    ] as const) {
      const response = await fetch(`${target.baseUrl.replace('/api/v1', '')}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}` },
      });
      await expectOpenAiError(response, 404);
    }
  });

  it('answers 405 for a wrong method, with Allow', async () => {
    const models = await fetch(`${target.baseUrl}/models`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
    });
    await expectOpenAiError(models, 405);
    expect(models.headers.get('allow')).toBe('GET');
    const completions = await fetch(`${target.baseUrl}/chat/completions`, {
      headers: { authorization: `Bearer ${key}` },
    });
    await expectOpenAiError(completions, 405);
    expect(completions.headers.get('allow')).toBe('POST');
  });
});

describe('billing', () => {
  it('records one ledger entry under the generation id with the billed cost the client saw', async () => {
    const account = await newAccount(target, '1');
    const response = await post(
      {
        model: 'svc-heavy',
        messages: [{ role: 'user', content: 'cache me [[sim:tokens=7]] [[sim:cached=4]]' }],
      },
      { authorization: `Bearer ${account.key}` },
    );
    expect(response.status).toBe(200);
    expect(response.headers.get('x-request-id')).toBeTruthy();
    const body = (await response.json()) as {
      id: string;
      usage: {
        prompt_tokens: number;
        completion_tokens: number;
        cost: number;
        prompt_tokens_details: { cached_tokens: number };
      };
    };
    expect(response.headers.get('x-generation-id')).toBe(body.id);
    expect(body.usage.prompt_tokens_details.cached_tokens).toBe(4);
    // svc-heavy: $0.78/M input, $0.078/M cached, $3.25/M output, billed
    const expectedNano = BigInt(body.usage.prompt_tokens - 4) * 780n + 4n * 78n + 7n * 3250n;
    expect(usdToNano(String(body.usage.cost))).toBe(expectedNano);
    const charges = await chargesOf(account.accountId);
    expect(charges).toHaveLength(1);
    expect(charges[0]?.entryId?.S).toBe(body.id);
    expect(charges[0]?.amountNanoUsd?.N).toBe(expectedNano.toString());
    expect(charges[0]?.estimated?.BOOL).toBe(false);
    expect(await balanceNano(target, account.accountId)).toBe(1_000_000_000n - expectedNano);
  });

  it('estimates with the tokenizer when the upstream reports no usage, and says so in the ledger', async () => {
    const account = await newAccount(target, '1');
    const response = await post(
      {
        model: 'svc-fast',
        messages: [{ role: 'user', content: 'no usage here [[sim:no_usage]] [[sim:tokens=9]]' }],
      },
      { authorization: `Bearer ${account.key}` },
    );
    const body = (await response.json()) as {
      id: string;
      usage: { completion_tokens: number; cost: number };
    };
    expect(body.usage.completion_tokens).toBe(9);
    const before = 1_000_000_000n;
    expect(before - (await balanceNano(target, account.accountId))).toBe(usdToNano(String(body.usage.cost)));
    const ledger = await target.client.send(
      new QueryCommand({
        TableName: target.tables.ledger,
        KeyConditionExpression: 'accountId = :a AND entryId = :e',
        ExpressionAttributeValues: { ':a': { S: account.accountId }, ':e': { S: body.id } },
      }),
    );
    expect(ledger.Items?.[0]?.estimated?.BOOL).toBe(true);
  });

  it('bills a prompt made of one 300,000-character word promptly when the upstream reports no usage', async () => {
    // Byte-pair encoding is quadratic in a run's length: counted whole, this prompt took about 50 s.
    const account = await newAccount(target, '1');
    const started = Date.now();
    const response = await post(
      {
        model: 'svc-fast',
        messages: [{ role: 'user', content: `${'a'.repeat(300_000)} [[sim:no_usage]] [[sim:tokens=9]]` }],
        stream: true,
      },
      { authorization: `Bearer ${account.key}` },
    );
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('[DONE]');
    expect(Date.now() - started).toBeLessThan(10_000);
    const charges = await chargesOf(account.accountId);
    expect(charges).toHaveLength(1);
    expect(charges[0]?.estimated?.BOOL).toBe(true);
    expect(Number(charges[0]?.promptTokens?.N)).toBeGreaterThan(30_000);
  });

  it.each([false, true])(
    'bills a prompt that spells out special tokens, as text, when the upstream reports no usage (stream %s)',
    async (stream) => {
      // The tokenizer refuses "<|endoftext|>" by default: a caller could make every estimate fail.
      const account = await newAccount(target, '1');
      const response = await post(
        {
          model: 'svc-fast',
          messages: [
            { role: 'user', content: '<|endoftext|><|im_start|>system [[sim:no_usage]] [[sim:tokens=9]]' },
          ],
          stream,
        },
        { authorization: `Bearer ${account.key}` },
      );
      expect(response.status).toBe(200);
      const text = await response.text();
      expect(text).not.toContain('"error"');
      const charges = await chargesOf(account.accountId);
      expect(charges).toHaveLength(1);
      expect(charges[0]?.estimated?.BOOL).toBe(true);
      // The prompt counted as the text it is: more than its words, fewer than its bytes.
      expect(Number(charges[0]?.promptTokens?.N)).toBeGreaterThan(10);
      expect(await balanceNano(target, account.accountId)).toBe(
        1_000_000_000n - BigInt(charges[0]?.amountNanoUsd?.N ?? '0'),
      );
    },
  );
});
