import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIMULATOR_PRICES } from '../../functions/core/tiers.js';
import { type FakeUpstream, startFakeUpstream } from '../support/fake-upstream.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

/**
 * The normal tool-call loop of the openai SDK against an OpenRouter-shaped upstream, whose assistant
 * messages carry `reasoning`, `reasoning_details` and `annotations`: the SDK pushes
 * `choices[0].message` back into `messages` as it came, and every round must be accepted. Local
 * only: it needs its own upstream.
 */
let upstream: FakeUpstream;
let target: Target;

function reply(round: number) {
  const base = { role: 'assistant', refusal: null, reasoning: null, annotations: [] as unknown[] };
  const message =
    round < 3
      ? {
          ...base,
          content: null,
          reasoning: round === 2 ? 'I need the other city too.' : null,
          reasoning_details: [{ type: 'reasoning.text', text: 'thinking', format: 'unknown', index: 0 }],
          tool_calls: [
            {
              index: 0,
              id: `call_${round}`,
              type: 'function',
              function: {
                name: 'get_weather',
                arguments: JSON.stringify({ city: round === 1 ? 'Oslo' : 'Lima' }),
              },
            },
          ],
        }
      : {
          ...base,
          content: 'Oslo is colder than Lima.',
          annotations: [
            {
              type: 'url_citation',
              url_citation: { url: 'https://x', title: 'x', start_index: 0, end_index: 1 },
            },
          ],
        };
  return {
    id: `gen-or-${round}`,
    provider: 'SomeProvider',
    model: 'openai/gpt-4o-mini',
    object: 'chat.completion',
    created: 1_767_225_600,
    choices: [
      {
        index: 0,
        logprobs: null,
        finish_reason: round < 3 ? 'tool_calls' : 'stop',
        native_finish_reason: 'stop',
        message,
      },
    ],
    usage: { prompt_tokens: 40 * round, completion_tokens: 12, total_tokens: 40 * round + 12 },
  };
}

beforeAll(async () => {
  upstream = await startFakeUpstream((body, res) => {
    const round = (body.messages as { role: string }[]).filter((m) => m.role === 'tool').length + 1;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(reply(round)));
  });
  const url = upstream.url;
  const target_ = (tier: keyof typeof SIMULATOR_PRICES) => [
    { baseUrl: url, model: 'openai/gpt-4o-mini', prices: SIMULATOR_PRICES[tier] },
  ];
  target = await startTarget({
    adminAs: 'ciSuite',
    env: {
      TIERS_CONFIG: JSON.stringify({
        'svc-fast': target_('svc-fast'),
        'svc-pro': target_('svc-pro'),
        'svc-heavy': target_('svc-heavy'),
      }),
    },
  });
});
afterAll(async () => {
  await target?.stop();
  await upstream?.close();
});

describe.skipIf(Boolean(process.env.SVC_BASE_URL))('the openai SDK tool-call loop, OpenRouter-shaped', () => {
  it('is answered 200 for three rounds, with the echoed fields accepted and forwarded', async () => {
    const { key } = await newAccount(target);
    const client = new OpenAI({ baseURL: target.baseUrl, apiKey: key, maxRetries: 0 });
    const tools = [
      {
        type: 'function' as const,
        function: {
          name: 'get_weather',
          parameters: { type: 'object', properties: { city: { type: 'string' } } },
        },
      },
    ];
    const messages: ChatCompletionMessageParam[] = [
      { role: 'user', content: 'Which is colder, Oslo or Lima?' },
    ];
    let final = '';
    for (let round = 1; round <= 3; round++) {
      const completion = await client.chat.completions.create({ model: 'svc-fast', messages, tools });
      const message = completion.choices[0]?.message;
      if (!message) throw new Error('no message');
      // The usual loop: the assistant message goes back exactly as it came.
      messages.push(message);
      for (const call of message.tool_calls ?? [])
        messages.push({ role: 'tool', tool_call_id: call.id, content: '{"celsius": 3}' });
      if (!message.tool_calls?.length) final = message.content ?? '';
    }
    expect(final).toBe('Oslo is colder than Lima.');
    expect(upstream.received).toHaveLength(3);
    const last = upstream.received.at(-1)?.messages as Record<string, unknown>[];
    const echoed = last.filter((m) => m.role === 'assistant');
    expect(echoed).toHaveLength(2);
    expect(echoed[1]).toMatchObject({
      reasoning: 'I need the other city too.',
      reasoning_details: expect.any(Array),
    });
    expect((echoed[0]?.tool_calls as Record<string, unknown>[] | undefined)?.[0]).not.toHaveProperty('index');
  });
});
