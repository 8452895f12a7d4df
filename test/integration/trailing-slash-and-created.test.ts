import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTarget, type Target } from '../support/target.js';

/** One rule for trailing slashes on every route; a generation's `created` is its own time. */
let target: Target;
beforeAll(async () => {
  target = await startTarget();
});
afterAll(async () => {
  await target?.stop();
});

describe('paths and times as a newcomer meets them', () => {
  it.each(['/chat/completions/', '/chat/completions'])('POST %s is served', async (path) => {
    const { key } = await newAccount(target);
    const response = await fetch(`${target.baseUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'svc-fast',
        messages: [{ role: 'user', content: 'hi [[sim:tokens=2]]' }],
      }),
    });
    expect(response.status).toBe(200);
    await response.json();
  });

  it.each(['/models/', '/credits/', '/models/svc-fast/'])('GET %s is served', async (path) => {
    const { key } = await newAccount(target);
    const response = await fetch(`${target.baseUrl}${path}`, { headers: { authorization: `Bearer ${key}` } });
    expect(response.status).toBe(200);
    await response.json();
  });

  it("GET /generation reports created as the generation's own time, the one its id carries", async () => {
    const { key } = await newAccount(target);
    // A reply that takes a while: settled well after the generation started.
    const reply = await fetch(`${target.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'svc-fast',
        messages: [{ role: 'user', content: 'hi [[sim:tokens=2]] [[sim:first_byte_delay_ms=1500]]' }],
      }),
    });
    const body = (await reply.json()) as { id: string; created: number };
    const idSeconds = Number(body.id.split('-')[1]);
    expect(body.created).toBe(idSeconds);
    const generation = await fetch(`${target.baseUrl}/generation?id=${body.id}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(generation.status).toBe(200);
    expect(((await generation.json()) as { created: number }).created).toBe(idSeconds);
  });
});
