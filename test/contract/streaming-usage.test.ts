import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { streamText } from 'ai';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { usdToNano } from '../../functions/core/money.js';
import {
  type ContractLog,
  contractProblems,
  newContractLog,
  schemas,
  validatingFetch,
} from '../support/contract.js';
import { readSse } from '../support/sse.js';
import { balanceNano, newAccount, startTarget, type Target } from '../support/target.js';

/**
 * Where a stream's usage goes, as clients read it. A client that did not ask for
 * `stream_options.include_usage` gets it on the last chunk with a finish_reason, so the loop most
 * code starts from (`chunk.choices[0].delta.content` on every chunk, OpenAI's quickstart) never
 * meets a chunk without a choice; one that asked gets OpenAI's own shape, `"usage": null` on every
 * chunk and a last chunk with no choices and the usage. Either way `usage.cost` is the amount billed,
 * and the stream ends with `data: [DONE]`.
 */
let target: Target;
let log: ContractLog;
beforeAll(async () => {
  target = await startTarget({ adminAs: 'ciSuite' });
});
afterAll(async () => {
  await target?.stop();
});
beforeEach(() => {
  log = newContractLog();
});
afterEach(async () => {
  expect(await contractProblems(log)).toEqual([]);
});

const openai = (apiKey: string) =>
  new OpenAI({ baseURL: target.baseUrl, apiKey, maxRetries: 0, fetch: validatingFetch(log) });
const costNano = (cost: unknown) => usdToNano(String(cost));
type UsageWithCost = OpenAI.CompletionUsage & { cost: number };

/** A stream over plain HTTP, its chunks parsed, each checked against OpenAI's chunk schema. */
async function rawStream(key: string, prompt: string, extra: Record<string, unknown> = {}) {
  const response = await fetch(`${target.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'svc-fast',
      messages: [{ role: 'user', content: prompt }],
      stream: true,
      ...extra,
    }),
  });
  expect(response.status).toBe(200);
  const { data } = await readSse(response);
  expect(data.at(-1)).toBe('[DONE]');
  const chunks = data.slice(0, -1).map((payload) => JSON.parse(payload) as Record<string, unknown>);
  for (const chunk of chunks) {
    const valid = schemas.chunk(chunk);
    expect(valid, `${JSON.stringify(schemas.chunk.errors)} in ${JSON.stringify(chunk)}`).toBe(true);
  }
  return chunks as unknown as (OpenAI.ChatCompletionChunk & { usage?: UsageWithCost | null })[];
}

describe('a stream without stream_options.include_usage', () => {
  it("survives the openai SDK's naive loop, the usage on the finish chunk and its cost what was billed", async () => {
    const { accountId, key } = await newAccount(target);
    const before = await balanceNano(target, accountId);
    const stream = await openai(key).chat.completions.create({
      model: 'svc-fast',
      messages: [{ role: 'user', content: 'Count [[sim:tokens=20]]' }],
      stream: true,
    });
    let text = '';
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) {
      // The loop as developers write it: no check that the chunk has a choice.
      // biome-ignore lint/style/noNonNullAssertion: the point is that it never fails
      const content = chunk.choices[0]!.delta.content;
      if (content) text += content;
      chunks.push(chunk);
    }
    expect(text.length).toBeGreaterThan(0);
    expect(chunks.every((c) => c.choices.length === 1)).toBe(true);
    const last = chunks.at(-1);
    expect(last?.choices[0]?.finish_reason).toBe('stop');
    const usage = last?.usage as UsageWithCost;
    expect(usage.completion_tokens).toBe(20);
    expect(chunks.filter((c) => c.usage).length).toBe(1);
    expect(before - (await balanceNano(target, accountId))).toBe(costNano(usage.cost));
  });

  it('survives the Python quickstart loop (chunk["choices"][0]["delta"]), which prints the same text', async () => {
    const { key } = await newAccount(target);
    const prompt = 'Tell me a story [[sim:tokens=15]]';
    const script = fileURLToPath(new URL('../support/naive_stream_loop.py', import.meta.url));
    const { stdout } = await promisify(execFile)(
      'python3',
      [script, target.baseUrl, key, 'svc-fast', prompt],
      {
        timeout: 30_000,
      },
    );
    const [printed, result] = stdout.split('\nRESULT ');
    const seen = JSON.parse(result ?? '{}') as { finish_reason: string; usage: UsageWithCost };
    expect(seen.finish_reason).toBe('stop');
    expect(seen.usage.completion_tokens).toBe(15);
    expect(seen.usage.cost).toBeGreaterThan(0);
    // The same prompt through the SDK: the simulator's reply is deterministic.
    const stream = await openai(key).chat.completions.create({
      model: 'svc-fast',
      messages: [{ role: 'user', content: prompt }],
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(printed).toBe(text);
  });

  it("gives the openai SDK's stream helpers a final completion with its finish_reason and usage", async () => {
    const { key } = await newAccount(target);
    const client = openai(key);
    const stream = client.chat.completions.stream({
      model: 'svc-fast',
      messages: [{ role: 'user', content: 'Count [[sim:tokens=12]]' }],
    });
    let text = '';
    stream.on('content', (delta) => {
      text += delta;
    });
    const final = await stream.finalChatCompletion();
    expect(final.choices[0]?.message.content).toBe(text);
    expect(final.choices[0]?.finish_reason).toBe('stop');
    expect((final.usage as UsageWithCost).completion_tokens).toBe(12);
    expect((final.usage as UsageWithCost).cost).toBeGreaterThan(0);

    // The tool runner, streaming: a tool call, its result, and the answer.
    let called: unknown;
    const runner = client.chat.completions.runTools({
      model: 'svc-heavy',
      stream: true,
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [
        {
          type: 'function',
          function: {
            name: 'get_weather',
            description: 'Current weather',
            parameters: {
              type: 'object',
              properties: { city: { type: 'string' } },
              required: ['city'],
              additionalProperties: false,
            },
            function: (args: { city: string }) => {
              called = args;
              return { temp: 21 };
            },
            parse: JSON.parse,
          },
        },
      ],
    });
    const content = await runner.finalContent();
    expect(called).toHaveProperty('city');
    expect(content).toContain('21');
    const total = await runner.totalUsage();
    expect(total.completion_tokens).toBeGreaterThan(0);
  });

  it('gives the Vercel AI SDK its text and usage', async () => {
    const { key } = await newAccount(target);
    // includeUsage false: the provider sends no stream_options at all.
    const provider = createOpenAICompatible({
      name: 'svc',
      baseURL: target.baseUrl,
      apiKey: key,
      includeUsage: false,
      fetch: validatingFetch(log),
    });
    const streamed = streamText({
      model: provider('svc-fast'),
      prompt: 'Count [[sim:tokens=9]]',
      maxRetries: 0,
    });
    let text = '';
    for await (const part of streamed.textStream) text += part;
    expect(text.length).toBeGreaterThan(0);
    expect(await streamed.finishReason).toBe('stop');
    const usage = await streamed.usage;
    expect(usage.outputTokens).toBe(9);
    expect(usage.inputTokens).toBeGreaterThan(0);
  });

  it('gives LangChain its text and usage metadata', async () => {
    const { key } = await newAccount(target);
    // streamUsage false: LangChain sends no stream_options.
    const llm = new ChatOpenAI({
      model: 'svc-fast',
      apiKey: key,
      maxRetries: 0,
      streamUsage: false,
      configuration: { baseURL: target.baseUrl, fetch: validatingFetch(log) },
    });
    let text = '';
    let outputTokens = 0;
    for await (const chunk of await llm.stream('Count [[sim:tokens=7]]')) {
      text += String(chunk.content);
      outputTokens +=
        (chunk as unknown as { usage_metadata?: { output_tokens: number } }).usage_metadata?.output_tokens ??
        0;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(outputTokens).toBe(7);
  });

  it('validates against OpenAI chunk schema, every chunk with a choice and only the last with usage', async () => {
    const { key } = await newAccount(target);
    for (const extra of [{}, { stream_options: { include_usage: false } }, { stream_options: null }]) {
      const chunks = await rawStream(key, 'Count [[sim:tokens=6]]', extra);
      expect(chunks.every((c) => c.choices.length === 1 && !('usage' in c && c.usage === null))).toBe(true);
      expect(chunks.slice(0, -1).some((c) => 'usage' in c)).toBe(false);
      expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('stop');
      expect(chunks.at(-1)?.usage?.completion_tokens).toBe(6);
    }
  });

  it('puts the usage on the length chunk of a stream cut at its output cap', async () => {
    const { key } = await newAccount(target);
    const chunks = await rawStream(key, 'Count [[sim:tokens=40]]', { max_tokens: 5 });
    expect(chunks.every((c) => c.choices.length === 1)).toBe(true);
    const last = chunks.at(-1);
    expect(last?.choices[0]?.finish_reason).toBe('length');
    expect(last?.usage?.cost).toBeGreaterThan(0);
  });
});

describe('a stream with stream_options.include_usage', () => {
  it("has OpenAI's shape: usage null on every chunk, then a last chunk with no choices and the usage", async () => {
    const { accountId, key } = await newAccount(target);
    const before = await balanceNano(target, accountId);
    const chunks = await rawStream(key, 'Count [[sim:tokens=8]]', {
      stream_options: { include_usage: true },
    });
    const earlier = chunks.slice(0, -1);
    expect(earlier.length).toBeGreaterThan(1);
    expect(earlier.every((c) => c.usage === null && c.choices.length === 1)).toBe(true);
    expect(earlier.at(-1)?.choices[0]?.finish_reason).toBe('stop');
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(last?.usage?.completion_tokens).toBe(8);
    expect(last?.usage?.total_tokens).toBe((last?.usage?.prompt_tokens ?? 0) + 8);
    expect(before - (await balanceNano(target, accountId))).toBe(costNano(last?.usage?.cost));
  });

  it('gives the openai SDK the usage on its last chunk, after the finish', async () => {
    const { key } = await newAccount(target);
    const stream = await openai(key).chat.completions.create({
      model: 'svc-fast',
      messages: [{ role: 'user', content: 'Count [[sim:tokens=10]]' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.at(-1)?.choices).toEqual([]);
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(10);
    expect(chunks.at(-2)?.choices[0]?.finish_reason).toBe('stop');
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
  });
});
