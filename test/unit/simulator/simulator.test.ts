import { countTokens } from 'gpt-tokenizer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator } from '../../../functions/simulator/server.js';
import { countPromptTokens, ONE_TOKEN_WORDS } from '../../../functions/simulator/tokens.js';
import { readSse } from '../../support/sse.js';

let sim: Awaited<ReturnType<typeof startSimulator>>;
beforeAll(async () => {
  sim = await startSimulator({ apiKey: 'sim-key' });
});
afterAll(async () => {
  await sim.close();
});

const headers = { 'content-type': 'application/json', authorization: 'Bearer sim-key' };
const ask = (content: string, extra: Record<string, unknown> = {}) =>
  fetch(`${sim.url}/chat/completions`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ model: 'sim-fast', messages: [{ role: 'user', content }], ...extra }),
  });

async function sse(response: Response): Promise<{ events: string[]; failed: boolean }> {
  const { data, broken } = await readSse(response);
  return { events: data, failed: broken };
}

/** A get_weather tool whose parameters require `required`. */
const weatherTools = (required: string[]) => [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string' }, days: { type: 'integer' }, unit: { enum: ['c', 'f'] } },
        required,
      },
    },
  },
];

describe('the upstream simulator', () => {
  it('uses one-token words, so N words are N tokens', () => {
    for (const word of ONE_TOKEN_WORDS) expect(countTokens(word)).toBe(1);
  });

  it('answers deterministically with real token counts', async () => {
    const a = (await (await ask('Hello there')).json()) as {
      choices: { message: { content: string } }[];
      usage: Record<string, number>;
    };
    const b = (await (await ask('Hello there')).json()) as typeof a;
    const content = a.choices[0]?.message.content ?? '';
    expect(content).toBe(b.choices[0]?.message.content);
    expect(a.usage.completion_tokens).toBe(countTokens(content));
    expect(a.usage.prompt_tokens).toBe(countPromptTokens([{ content: 'Hello there' }]));
  });

  it('honours tokens, cached and max_tokens', async () => {
    const exact = (await (await ask('x [[sim:tokens=17]] [[sim:cached=5]]')).json()) as {
      choices: { message: { content: string }; finish_reason: string }[];
      usage: { completion_tokens: number; prompt_tokens_details: { cached_tokens: number } };
    };
    expect(exact.usage.completion_tokens).toBe(17);
    expect(countTokens(exact.choices[0]?.message.content ?? '')).toBe(17);
    expect(exact.usage.prompt_tokens_details.cached_tokens).toBe(5);
    const capped = (await (await ask('x [[sim:tokens=30]]', { max_tokens: 4 })).json()) as typeof exact;
    expect(capped.usage.completion_tokens).toBe(4);
    expect(capped.choices[0]?.finish_reason).toBe('length');
  });

  it('answers an error status before any byte, with Retry-After on 429', async () => {
    const tooLong = await ask('x [[sim:error=400]]');
    expect(tooLong.status).toBe(400);
    expect(((await tooLong.json()) as { error: { code: string } }).error.code).toBe(
      'context_length_exceeded',
    );
    const limited = await ask('x [[sim:error=429]]', { stream: true });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('1');
    expect((await ask('x [[sim:error=503]]')).status).toBe(503);
  });

  it('streams deltas, a usage chunk only when asked, then [DONE]', async () => {
    const withUsage = await sse(
      await ask('x [[sim:tokens=5]]', { stream: true, stream_options: { include_usage: true } }),
    );
    expect(withUsage.events.at(-1)).toBe('[DONE]');
    const chunks = withUsage.events.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks.at(-1).choices).toEqual([]);
    expect(chunks.at(-1).usage.completion_tokens).toBe(5);
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    expect(countTokens(text)).toBe(5);
    const without = await sse(await ask('x [[sim:tokens=5]]', { stream: true }));
    expect(without.events.some((e) => e.includes('"usage"'))).toBe(false);
    const none = await sse(
      await ask('x [[sim:no_usage]]', { stream: true, stream_options: { include_usage: true } }),
    );
    expect(none.events.some((e) => e.includes('"usage"'))).toBe(false);
  });

  it('drops the connection after K chunks with cut_after', async () => {
    const cut = await sse(await ask('x [[sim:tokens=10]] [[sim:cut_after=3]]', { stream: true }));
    expect(cut.failed || !cut.events.includes('[DONE]')).toBe(true);
    expect(cut.events.includes('[DONE]')).toBe(false);
  });

  it('waits delay_ms before each chunk', async () => {
    const started = Date.now();
    await sse(await ask('x [[sim:tokens=3]] [[sim:delay_ms=40]]', { stream: true }));
    expect(Date.now() - started).toBeGreaterThanOrEqual(4 * 40);
  });

  it('calls a tool with arguments that satisfy its schema, and answers a tool result with text', async () => {
    const tools = weatherTools(['city']);
    const streamed = await sse(await ask('weather?', { tools, stream: true }));
    const chunks = streamed.events.filter((e) => e !== '[DONE]').map((e) => JSON.parse(e));
    const args = chunks.map((c) => c.choices[0]?.delta?.tool_calls?.[0]?.function?.arguments ?? '').join('');
    expect(JSON.parse(args)).toEqual({ city: 'example', days: 1, unit: 'c' });
    expect(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason).toBe('tool_calls');
    const answer = (await (
      await fetch(`${sim.url}/chat/completions`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          model: 'm',
          tools,
          messages: [
            { role: 'user', content: 'weather?' },
            {
              role: 'assistant',
              content: null,
              tool_calls: [
                { id: 'c1', type: 'function', function: { name: 'get_weather', arguments: args } },
              ],
            },
            { role: 'tool', tool_call_id: 'c1', content: '{"temp":21}' },
          ],
        }),
      })
    ).json()) as { choices: { message: { content: string } }[] };
    expect(answer.choices[0]?.message.content).toContain('{"temp":21}');
  });

  it('cuts a tool call at max_tokens, as a model does: its arguments end where the cap does, finish_reason length', async () => {
    const tools = weatherTools([]);
    const whole = (await (await ask('weather?', { tools })).json()) as {
      choices: {
        message: { tool_calls: { function: { name: string; arguments: string } }[] };
        finish_reason: string;
      }[];
      usage: { completion_tokens: number };
    };
    const call = whole.choices[0]?.message.tool_calls[0]?.function;
    expect(whole.usage.completion_tokens).toBe(countTokens(`${call?.name}${call?.arguments}`));
    const cap = whole.usage.completion_tokens - 3;
    const capped = (await (await ask('weather?', { tools, max_tokens: cap })).json()) as typeof whole;
    const cut = capped.choices[0]?.message.tool_calls[0]?.function;
    expect(capped.choices[0]?.finish_reason).toBe('length');
    expect(capped.usage.completion_tokens).toBeLessThanOrEqual(cap);
    expect(capped.usage.completion_tokens).toBe(countTokens(`${cut?.name}${cut?.arguments}`));
    expect(call?.arguments.startsWith(cut?.arguments ?? 'x')).toBe(true);
    // Streamed, the fragments add up to the same cut arguments and the same finish.
    const streamed = await sse(await ask('weather?', { tools, max_tokens: cap, stream: true }));
    const chunks = streamed.events.filter((e) => e !== '[DONE]').map((e) => JSON.parse(e));
    const args = chunks.map((c) => c.choices[0]?.delta?.tool_calls?.[0]?.function?.arguments ?? '').join('');
    expect(args).toBe(cut?.arguments);
    expect(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason).toBe('length');
  });

  it('requires its API key and answers 404 elsewhere', async () => {
    const denied = await fetch(`${sim.url}/chat/completions`, { method: 'POST', body: '{}' });
    expect(denied.status).toBe(401);
    const missing = await fetch(`${sim.url}/nothing`, { headers });
    expect(missing.status).toBe(404);
  });
});
