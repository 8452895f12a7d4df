/**
 * The forwarding policy end to end (local only: it needs its own upstream): fields outside OpenAI's
 * schema reach a `forward` target as sent; a `drop` target never sees them and the client is told
 * which in `x-dropped-fields`, even for a field name that is not printable ASCII; and a body nested
 * too deep is a 400, not a 5xx.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIMULATOR_PRICES } from '../../functions/core/tiers.js';
import { type FakeUpstream, startFakeUpstream } from '../support/fake-upstream.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

let upstream: FakeUpstream;
let target: Target;

beforeAll(async () => {
  upstream = await startFakeUpstream((_body, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'x',
        object: 'chat.completion',
        created: 1_767_225_600,
        model: 'up',
        choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'ok' } }],
        usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 },
      }),
    );
  });
  const url = upstream.url;
  const entry = (tier: keyof typeof SIMULATOR_PRICES, extraFields: 'forward' | 'drop') => [
    { baseUrl: url, model: `up-${tier}`, prices: SIMULATOR_PRICES[tier], extraFields },
  ];
  target = await startTarget({
    adminAs: 'ciSuite',
    env: {
      TIERS_CONFIG: JSON.stringify({
        'svc-fast': entry('svc-fast', 'forward'),
        'svc-pro': entry('svc-pro', 'drop'),
        'svc-heavy': entry('svc-heavy', 'forward'),
      }),
    },
  });
});
afterAll(async () => {
  await target?.stop();
  await upstream?.close();
});

const extras = {
  provider: { order: ['a'] },
  top_k: 40,
  'é☃\tkey': 1,
  messages: [
    { role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] },
    { role: 'assistant', content: 'ok', reasoning: 'r', annotations: [] },
    { role: 'user', content: 'again' },
  ],
};

async function post(key: string, body: unknown): Promise<Response> {
  return fetch(`${target.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

describe.skipIf(Boolean(process.env.SVC_BASE_URL))('forwarding policy', () => {
  it('a forward target receives the extra fields as sent, and no x-dropped-fields', async () => {
    const { key } = await newAccount(target);
    const response = await post(key, { model: 'svc-fast', ...extras });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-dropped-fields')).toBeNull();
    const body = upstream.received.at(-1);
    expect(body).toMatchObject({ model: 'up-svc-fast', provider: { order: ['a'] }, top_k: 40, 'é☃\tkey': 1 });
    const messages = body?.messages as Record<string, unknown>[];
    expect(messages[1]).toMatchObject({ reasoning: 'r', annotations: [] });
    expect(messages[0]).toMatchObject({ content: [{ cache_control: { type: 'ephemeral' } }] });
  });

  it('a drop target receives none of them, and the client is told which', async () => {
    const { key } = await newAccount(target);
    const response = await post(key, { model: 'svc-pro', ...extras });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-dropped-fields')?.split(', ')).toEqual([
      '%C3%A9%E2%98%83%09key',
      'messages[].annotations',
      'messages[].content[].cache_control',
      'messages[].reasoning',
      'provider',
      'top_k',
    ]);
    const body = upstream.received.at(-1) as Record<string, unknown>;
    expect(body.model).toBe('up-svc-pro');
    for (const name of ['provider', 'top_k', 'é☃\tkey']) expect(body).not.toHaveProperty([name]);
    const messages = body.messages as Record<string, unknown>[];
    expect(messages[1]).toEqual({ role: 'assistant', content: 'ok' });
    expect(messages[0]?.content).toEqual([{ type: 'text', text: 'hi' }]);
  });

  it('a body nested 100,000 levels deep is a 400 naming where, and nothing reaches the upstream', async () => {
    const { key } = await newAccount(target);
    const before = upstream.received.length;
    const depth = 100_000;
    const response = await post(
      key,
      `{"model":"svc-fast","messages":[{"role":"user","content":"hi"}],"provider":${'['.repeat(depth)}${']'.repeat(depth)}}`,
    );
    expect(response.status).toBe(400);
    const { error } = (await response.json()) as { error: { param: string; code: string } };
    expect(error).toMatchObject({ param: 'provider[0][0][0]', code: 'out_of_range' });
    expect(upstream.received.length).toBe(before);
  });
});
