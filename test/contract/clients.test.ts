import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { AIMessage, HumanMessage, SystemMessage, ToolMessage } from '@langchain/core/messages';
import { ChatOpenAI } from '@langchain/openai';
import { APICallError, generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import OpenAI, {
  APIError,
  AuthenticationError,
  BadRequestError,
  InternalServerError,
  NotFoundError,
  PermissionDeniedError,
} from 'openai';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { setAccountStatus } from '../../lib/admin/operations.js';
import { type ContractLog, contractProblems, newContractLog, validatingFetch } from '../support/contract.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

/**
 * The three client libraries TypeScript developers use most, pointed at the service by base URL
 * and key only: the official `openai` SDK, the Vercel AI SDK (`@ai-sdk/openai-compatible`) and
 * LangChain (`ChatOpenAI`). Every body and chunk they receive is validated against OpenAI's schemas.
 */
let target: Target;
let key: string;
let log: ContractLog;
beforeAll(async () => {
  target = await startTarget({ adminAs: 'ciSuite' });
  ({ key } = await newAccount(target, '50'));
});
afterAll(async () => {
  await target?.stop();
});
beforeEach(() => {
  log = newContractLog();
});
afterEach(async () => {
  const problems = await contractProblems(log);
  if (process.env.DEBUG_CONTRACT) console.log(problems.slice(0, 6).join('\n'));
  expect(problems).toEqual([]);
});

const weatherParameters = {
  type: 'object',
  properties: { city: { type: 'string', description: 'City name' } },
  required: ['city'],
  additionalProperties: false,
} as const;

const openai = (apiKey = key) =>
  new OpenAI({ baseURL: target.baseUrl, apiKey, maxRetries: 0, fetch: validatingFetch(log) });
const vercel = (apiKey = key) =>
  createOpenAICompatible({
    name: 'svc',
    baseURL: target.baseUrl,
    apiKey,
    includeUsage: true,
    fetch: validatingFetch(log),
  });
const langchain = (model = 'svc-fast', apiKey = key) =>
  new ChatOpenAI({
    model,
    apiKey,
    maxRetries: 0,
    streamUsage: true,
    configuration: { baseURL: target.baseUrl, fetch: validatingFetch(log) },
  });

/** Accounts in each state the error scenarios need, and the message each error must carry. */
async function errorKeys() {
  const revoked = await newAccount(target);
  const { revokeKey } = await import('../../lib/admin/operations.js');
  await revokeKey(target.admin, revoked.keyId);
  const suspended = await newAccount(target);
  await setAccountStatus(target.admin, suspended.accountId, 'suspended');
  const empty = await newAccount(target, '0');
  return { revoked: revoked.key, suspended: suspended.key, empty: empty.key };
}

describe('the official openai SDK', () => {
  it('lists models, chats, streams with usage and exposes the request id', async () => {
    const client = openai();
    const models = await client.models.list();
    expect(
      models.data.map((m) => (m as unknown as { display_name: string }).display_name).every(Boolean),
    ).toBe(true);
    const one = await client.models.retrieve('svc-heavy');
    expect(one).toMatchObject({ id: 'svc-heavy', object: 'model', owned_by: expect.any(String) });
    await expect(client.models.retrieve('gpt-4o')).rejects.toBeInstanceOf(NotFoundError);
    const {
      data: completion,
      response,
      request_id,
    } = await client.chat.completions
      .create({ model: 'svc-fast', messages: [{ role: 'user', content: 'Hello' }] })
      .withResponse();
    expect(request_id).toBe(response.headers.get('x-request-id'));
    expect(response.headers.get('x-generation-id')).toBe(completion.id);
    expect((completion.usage as unknown as { cost: number }).cost).toBeGreaterThan(0);
    const stream = await client.chat.completions.create({
      model: 'svc-pro',
      messages: [{ role: 'user', content: 'Count' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of stream) usage = chunk.usage ?? usage;
    expect((usage as unknown as { cost: number }).cost).toBeGreaterThan(0);
    await contractProblems(log);
    expect(log.chunks).toBeGreaterThan(2);
  });

  it('completes a tool-call round trip and a multi-turn conversation', async () => {
    const client = openai();
    const tools: OpenAI.ChatCompletionTool[] = [
      { type: 'function', function: { name: 'get_weather', parameters: weatherParameters } },
    ];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
    const first = await client.chat.completions.create({ model: 'svc-heavy', messages, tools });
    const call = first.choices[0]?.message.tool_calls?.[0];
    expect(first.choices[0]?.finish_reason).toBe('tool_calls');
    expect(call?.type === 'function' && call.function.name).toBe('get_weather');
    if (call?.type !== 'function') throw new Error('no function call');
    expect(JSON.parse(call.function.arguments)).toHaveProperty('city');
    messages.push(first.choices[0]?.message as OpenAI.ChatCompletionMessageParam, {
      role: 'tool',
      tool_call_id: call.id,
      content: '{"temp":21}',
    });
    const answer = await client.chat.completions.create({ model: 'svc-heavy', messages, tools });
    expect(answer.choices[0]?.message.content).toContain('21');
    messages.push(answer.choices[0]?.message as OpenAI.ChatCompletionMessageParam, {
      role: 'user',
      content: 'And tomorrow?',
    });
    const third = await client.chat.completions.create({
      model: 'svc-heavy',
      messages: [{ role: 'system', content: 'Be brief.' }, ...messages],
    });
    expect(third.choices[0]?.message.content).toBeTruthy();
  });

  it('raises its typed errors with the message intact', async () => {
    const keys = await errorKeys();
    const ask = (apiKey: string, content = 'hi', model = 'svc-fast') =>
      openai(apiKey)
        .chat.completions.create({ model, messages: [{ role: 'user', content }] })
        .catch((e: unknown) => e);
    const bad = await ask(key, 'hi', 'gpt-4o');
    expect(bad).toBeInstanceOf(BadRequestError);
    expect((bad as BadRequestError).message).toContain(
      "Supported values are: 'svc-fast', 'svc-pro', 'svc-heavy'",
    );
    expect(await ask(keys.revoked)).toBeInstanceOf(AuthenticationError);
    const suspended = await ask(keys.suspended);
    expect(suspended).toBeInstanceOf(PermissionDeniedError);
    expect((suspended as APIError).message).toContain('suspended');
    const empty = (await ask(keys.empty)) as APIError;
    expect(empty).toBeInstanceOf(APIError);
    expect(empty.status).toBe(402);
    const upstream = await ask(key, 'hi [[sim:error=500]]');
    expect(upstream).toBeInstanceOf(InternalServerError);
    expect((upstream as APIError).status).toBe(502);
    expect((upstream as APIError).message).toContain('upstream');
  });
});

describe('the Vercel AI SDK (@ai-sdk/openai-compatible)', () => {
  it('generates text and streams it, with usage', async () => {
    const provider = vercel();
    const result = await generateText({ model: provider('svc-fast'), prompt: 'Hello', maxRetries: 0 });
    expect(result.text.length).toBeGreaterThan(0);
    expect(result.usage.outputTokens).toBeGreaterThan(0);
    const streamed = streamText({ model: provider('svc-pro'), prompt: 'Count to five', maxRetries: 0 });
    let text = '';
    for await (const part of streamed.textStream) text += part;
    expect(text.length).toBeGreaterThan(0);
    const usage = await streamed.usage;
    expect(usage.inputTokens).toBeGreaterThan(0);
    expect(usage.outputTokens).toBeGreaterThan(0);
  });

  it('runs a tool-call round trip and a multi-turn conversation', async () => {
    const provider = vercel();
    let called: unknown;
    const result = await generateText({
      model: provider('svc-heavy'),
      prompt: 'Weather in Paris?',
      tools: {
        get_weather: tool({
          description: 'Current weather',
          inputSchema: jsonSchema<{ city: string }>(weatherParameters),
          execute: async (input) => {
            called = input;
            return { temp: 21 };
          },
        }),
      },
      stopWhen: stepCountIs(2),
      maxRetries: 0,
    });
    expect(called).toHaveProperty('city');
    expect(result.steps).toHaveLength(2);
    expect(result.text).toContain('21');
    const turn = await generateText({
      model: provider('svc-fast'),
      system: 'Be brief.',
      messages: [
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello!' },
        { role: 'user', content: 'How are you?' },
      ],
      maxRetries: 0,
    });
    expect(turn.text.length).toBeGreaterThan(0);
  });

  it('raises APICallError with the status and message for each error', async () => {
    const keys = await errorKeys();
    const fail = async (apiKey: string, model = 'svc-fast', prompt = 'hi') => {
      const error = await generateText({ model: vercel(apiKey)(model), prompt, maxRetries: 0 }).catch(
        (e: unknown) => e,
      );
      expect(APICallError.isInstance(error)).toBe(true);
      return error as APICallError;
    };
    const bad = await fail(key, 'gpt-4o');
    expect(bad.statusCode).toBe(400);
    expect(bad.message).toContain("Invalid value for 'model'");
    expect((await fail(keys.revoked)).statusCode).toBe(401);
    const suspended = await fail(keys.suspended);
    expect(suspended.statusCode).toBe(403);
    expect(suspended.message).toContain('suspended');
    const empty = await fail(keys.empty);
    expect(empty.statusCode).toBe(402);
    expect(empty.responseBody).toContain('topUpUrl');
    const upstream = await fail(key, 'svc-fast', 'hi [[sim:error=503]]');
    expect(upstream.statusCode).toBe(502);
    expect(upstream.message).toContain('upstream');
  });
});

describe('LangChain (ChatOpenAI)', () => {
  it('invokes and streams, with usage metadata', async () => {
    const reply = await langchain().invoke('Hello');
    expect(String(reply.content).length).toBeGreaterThan(0);
    expect(
      (reply as unknown as { usage_metadata?: { output_tokens: number } }).usage_metadata?.output_tokens,
    ).toBeGreaterThan(0);
    let text = '';
    let outputTokens = 0;
    for await (const chunk of await langchain('svc-pro').stream('Count to five')) {
      text += String(chunk.content);
      outputTokens +=
        (chunk as unknown as { usage_metadata?: { output_tokens: number } }).usage_metadata?.output_tokens ??
        0;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(outputTokens).toBeGreaterThan(0);
  });

  it('runs a tool-call round trip and a multi-turn conversation', async () => {
    const llm = langchain('svc-heavy').bindTools([
      {
        type: 'function',
        function: { name: 'get_weather', description: 'Current weather', parameters: weatherParameters },
      },
    ]);
    const question = new HumanMessage('Weather in Paris?');
    const first = await llm.invoke([question]);
    const call = first.tool_calls?.[0];
    expect(call?.name).toBe('get_weather');
    expect(call?.args).toHaveProperty('city');
    const answer = await llm.invoke([
      question,
      first,
      new ToolMessage({ tool_call_id: call?.id ?? '', content: '{"temp":21}' }),
    ]);
    expect(String(answer.content)).toContain('21');
    const turn = await langchain().invoke([
      new SystemMessage('Be brief.'),
      new HumanMessage('Hi'),
      new AIMessage('Hello!'),
      new HumanMessage('How are you?'),
    ]);
    expect(String(turn.content).length).toBeGreaterThan(0);
  });

  it("raises the openai SDK's typed errors with the message intact", async () => {
    const keys = await errorKeys();
    const fail = (apiKey: string, model = 'svc-fast', prompt = 'hi') =>
      langchain(model, apiKey)
        .invoke(prompt)
        .catch((e: unknown) => e);
    const bad = await fail(key, 'gpt-4o');
    expect(bad).toBeInstanceOf(BadRequestError);
    expect(String((bad as Error).message)).toContain("Invalid value for 'model'");
    expect(await fail(keys.revoked)).toBeInstanceOf(AuthenticationError);
    const suspended = await fail(keys.suspended);
    expect(suspended).toBeInstanceOf(PermissionDeniedError);
    expect(String((suspended as Error).message)).toContain('suspended');
    const empty = (await fail(keys.empty)) as APIError;
    expect(empty.status).toBe(402);
    const upstream = (await fail(key, 'svc-fast', 'hi [[sim:error=500]]')) as APIError;
    expect(upstream).toBeInstanceOf(InternalServerError);
    expect(upstream.status).toBe(502);
  });
});

describe('schema validation itself', () => {
  it('validates bodies and chunks, and flags a body that breaks the schema', async () => {
    const client = openai();
    await client.models.list();
    expect(log.jsonBodies).toBe(1);
    const { schemas } = await import('../support/contract.js');
    expect(
      schemas.completion({ id: 'x', object: 'chat.completion', created: 1, model: 'm', choices: [{}] }),
    ).toBe(false);
    expect(
      schemas.chunk({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [] }),
    ).toBe(true);
  });

  it('accepts the deliberate error chunk of a failed stream, and checks the rest of it', async () => {
    const stream = await openai().chat.completions.create({
      model: 'svc-fast',
      messages: [{ role: 'user', content: 'x [[sim:delay_ms=20]] [[sim:cut_after=3]]' }],
      stream: true,
    });
    const error = await (async () => {
      for await (const _chunk of stream) {
        // read until the error chunk
      }
    })().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(APIError);
    await contractProblems(log);
    expect(log.errorChunks).toBe(1);
  });
});
