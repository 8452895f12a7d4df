import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTarget, type Target } from '../support/target.js';

/** The Function URL's 6 MB request limit, as the emulator enforces it, and the connection after it. */
let target: Target;
beforeAll(async () => {
  target = await startTarget();
});
afterAll(async () => {
  await target?.stop();
});

describe('a slow JSON reply', () => {
  it('reaches the client after longer than an idle keep-alive socket lives (5 s in Node)', async () => {
    const { key } = await newAccount(target);
    const response = await fetch(`${target.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'svc-fast',
        messages: [{ role: 'user', content: 'slow [[sim:tokens=3]] [[sim:first_byte_delay_ms=6500]]' }],
      }),
    });
    expect(response.status).toBe(200);
    expect(((await response.json()) as { object: string }).object).toBe('chat.completion');
  }, 20_000);
});

describe('an oversized request body', () => {
  it("is answered 413 in OpenAI's shape with a request id and Connection: close, and the next request is served", async () => {
    const { key } = await newAccount(target);
    const huge = JSON.stringify({
      model: 'svc-fast',
      messages: [{ role: 'user', content: 'x'.repeat(7 * 1024 * 1024) }],
    });
    const post = (body: string) =>
      fetch(`${target.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body,
      });
    const refused = await post(huge);
    expect(refused.status).toBe(413);
    expect(refused.headers.get('connection')).toBe('close');
    // OpenAI's error shape, a request id and CORS, as every answer of the service.
    expect(refused.headers.get('x-request-id')).toBeTruthy();
    expect(refused.headers.get('access-control-allow-origin')).toBe('*');
    expect(await refused.json()).toEqual({
      error: {
        message: expect.stringMatching(/larger than the 6291456 bytes \(6 MB\)/),
        type: 'invalid_request_error',
        param: null,
        code: 'request_too_large',
      },
    });
    const next = await post(
      JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'hi [[sim:tokens=2]]' }] }),
    );
    expect(next.status).toBe(200);
  });
});
