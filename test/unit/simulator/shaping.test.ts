import { Ajv } from 'ajv';
import { countTokens } from 'gpt-tokenizer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator } from '../../../functions/simulator/server.js';
import { schemas } from '../../support/contract.js';
import { readSse } from '../../support/sse.js';

/** `stop`, `response_format` and `logprobs`, as OpenAI's API honours them, in JSON and streamed replies. */
let sim: Awaited<ReturnType<typeof startSimulator>>;
beforeAll(async () => {
  sim = await startSimulator({});
});
afterAll(async () => {
  await sim.close();
});

interface Choice {
  message?: { content: string | null };
  delta?: { content?: string | null };
  finish_reason: string | null;
  logprobs: {
    content: { token: string; logprob: number; bytes: number[]; top_logprobs: unknown[] }[];
  } | null;
}
interface Completion {
  choices: Choice[];
  usage: { completion_tokens: number };
}

const post = (content: string, extra: Record<string, unknown>) =>
  fetch(`${sim.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'sim-fast', messages: [{ role: 'user', content }], ...extra }),
  });

/** The JSON reply, checked against OpenAI's schema. */
async function completion(content: string, extra: Record<string, unknown> = {}) {
  const body = (await (await post(content, extra)).json()) as Completion;
  expect(schemas.completion(body), JSON.stringify(schemas.completion.errors)).toBe(true);
  const choice = body.choices[0] as Choice;
  return { text: choice.message?.content ?? '', choice, usage: body.usage };
}

/** The streamed reply, every chunk checked against OpenAI's schema: text, finish reason, logprobs. */
async function streamed(content: string, extra: Record<string, unknown> = {}) {
  const { data } = await readSse(await post(content, { ...extra, stream: true }));
  const chunks = data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d) as { choices: Choice[] });
  for (const chunk of chunks) expect(schemas.chunk(chunk), JSON.stringify(schemas.chunk.errors)).toBe(true);
  const choices = chunks.flatMap((chunk) => chunk.choices);
  return {
    text: choices.map((c) => c.delta?.content ?? '').join(''),
    finish: choices.map((c) => c.finish_reason).find((f) => f !== null),
    logprobs: choices.flatMap((c) => c.logprobs?.content ?? []),
  };
}

describe('the simulator honours stop', () => {
  it('ends the reply before the first stop sequence, not returning it, finish_reason "stop"', async () => {
    const prompt = 'Tell me a long story [[sim:tokens=40]]';
    const full = (await completion(prompt)).text;
    const word = full.split(/(?= )/)[12] ?? '';
    const expected = full.slice(0, full.indexOf(word));
    expect(expected.length).toBeGreaterThan(0);
    expect(expected.length).toBeLessThan(full.length);
    for (const stop of [word, ['never-in-the-reply', word]]) {
      const json = await completion(prompt, { stop });
      expect(json.text).toBe(expected);
      expect(json.choice.finish_reason).toBe('stop');
      expect(json.usage.completion_tokens).toBe(countTokens(expected));
      const stream = await streamed(prompt, { stop });
      expect([stream.text, stream.finish]).toEqual([expected, 'stop']);
    }
    expect((await completion(prompt, { stop: ['never-in-the-reply'] })).text).toBe(full);
  });
});

describe('the simulator honours response_format', () => {
  it('json_object: the reply is a JSON object, in JSON and streamed', async () => {
    const format = { response_format: { type: 'json_object' } };
    for (const text of [
      (await completion('Reply in JSON', format)).text,
      (await streamed('Reply in JSON', format)).text,
    ]) {
      const value = JSON.parse(text) as unknown;
      expect(typeof value === 'object' && value !== null && !Array.isArray(value)).toBe(true);
    }
  });

  it('json_schema: the reply validates against the given schema, in JSON and streamed', async () => {
    const schema = {
      type: 'object',
      properties: {
        city: { type: 'string', minLength: 12 },
        days: { type: 'integer', minimum: 3, maximum: 7 },
        unit: { enum: ['c', 'f'] },
        tags: { type: 'array', items: { type: 'string' }, minItems: 2 },
        where: {
          type: 'object',
          properties: { lat: { type: 'number' }, ok: { type: 'boolean' } },
          required: ['lat', 'ok'],
          additionalProperties: false,
        },
        note: { anyOf: [{ type: 'string' }, { type: 'null' }] },
      },
      required: ['city', 'days', 'unit', 'tags', 'where', 'note'],
      additionalProperties: false,
    };
    const validate = new Ajv({ strict: false }).compile(schema);
    const format = {
      response_format: { type: 'json_schema', json_schema: { name: 'weather', strict: true, schema } },
    };
    const json = await completion('The weather', format);
    expect(validate(JSON.parse(json.text)), JSON.stringify(validate.errors)).toBe(true);
    expect(json.usage.completion_tokens).toBe(countTokens(json.text));
    const stream = await streamed('The weather', format);
    expect(validate(JSON.parse(stream.text)), JSON.stringify(validate.errors)).toBe(true);
  });
});

describe('the simulator honours logprobs', () => {
  it('one entry per completion token, with token, logprob, bytes and top_logprobs, in JSON and streamed', async () => {
    const extra = { logprobs: true, top_logprobs: 3 };
    const json = await completion('Hello [[sim:tokens=10]]', extra);
    const entries = json.choice.logprobs?.content ?? [];
    expect(entries).toHaveLength(json.usage.completion_tokens);
    expect(entries.map((e) => e.token).join('')).toBe(json.text);
    for (const entry of entries) {
      expect(entry.bytes).toEqual([...Buffer.from(entry.token, 'utf8')]);
      expect(entry.logprob).toBeLessThanOrEqual(0);
      expect(entry.top_logprobs).toHaveLength(3);
      expect(entry.top_logprobs[0]).toEqual({
        token: entry.token,
        logprob: entry.logprob,
        bytes: entry.bytes,
      });
    }
    const stream = await streamed('Hello [[sim:tokens=10]]', extra);
    expect(stream.logprobs).toEqual(entries);
    expect(stream.text).toBe(json.text);
    expect((await completion('Hello [[sim:tokens=10]]')).choice.logprobs).toBeNull();
  });

  it('with stop and response_format together: logprobs cover exactly the text returned', async () => {
    const json = await completion('Reply in JSON', {
      response_format: { type: 'json_object' },
      stop: '}',
      logprobs: true,
    });
    expect(json.choice.finish_reason).toBe('stop');
    expect(json.text).not.toContain('}');
    expect(json.choice.logprobs?.content.map((e) => e.token).join('')).toBe(json.text);
  });
});
