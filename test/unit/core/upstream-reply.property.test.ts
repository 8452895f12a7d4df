/**
 * The hand-checked text chunk (textChunk) and text completion (textCompletion) against the schemas
 * they shortcut: over generated upstream chunks and JSON replies, whatever they accept the schema accepts too, as the same value with the same key order (the
 * bytes the client gets), and what it declines is left to the schema. It must also accept the chunks
 * most of a stream is made of, or it saves nothing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  chunkBySchema,
  completionBySchema,
  parseChunkData,
  parseCompletionBody,
  textChunk,
  textCompletion,
} from '../../../functions/core/upstream-reply.js';
import { junk, mostly, rarely } from '../../support/arbitraries.js';

const text = mostly(fc.oneof(fc.string({ maxLength: 12 }), fc.constant(null)));

const delta = fc.record(
  {
    role: mostly(fc.constantFrom('assistant', 'developer', 'system', 'user', 'tool', 'bot', '')),
    content: text,
    refusal: text,
    reasoning: text,
    reasoning_content: text,
    tool_calls: rarely(
      fc.oneof(
        fc.constant([{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '{' } }]),
        junk,
      ),
    ),
    annotations: rarely(fc.oneof(fc.constant([]), junk)),
    reasoning_details: rarely(fc.oneof(fc.constant([{ type: 'reasoning.text', text: 'x' }]), junk)),
    function_call: rarely(fc.oneof(fc.constant({ name: 'f' }), junk)),
    provider_private: junk,
  },
  { requiredKeys: [] },
);

const choice = fc.record(
  {
    index: mostly(fc.oneof(fc.integer({ min: -2, max: 1_030 }), fc.constantFrom(0.5, '0', null, 2 ** 53))),
    delta: mostly(delta),
    logprobs: fc.oneof(fc.constant(null), rarely(fc.oneof(fc.constant({ content: null }), junk))),
    finish_reason: mostly(
      fc.constantFrom(null, 'stop', 'length', 'tool_calls', 'end_turn', 'x'.repeat(32), 'x'.repeat(33)),
    ),
    native_finish_reason: junk,
  },
  { requiredKeys: [] },
);

const chunk = fc.record(
  {
    id: fc.string({ maxLength: 8 }),
    object: fc.constant('chat.completion.chunk'),
    choices: mostly(
      fc.oneof(
        { arbitrary: fc.array(choice, { minLength: 1, maxLength: 1 }), weight: 4 },
        { arbitrary: fc.array(choice, { maxLength: 3 }), weight: 1 },
      ),
    ),
    system_fingerprint: mostly(fc.oneof(fc.string({ maxLength: 8 }), fc.constant('f'.repeat(257)))),
    service_tier: mostly(fc.constantFrom('default', 'auto', 'flex', 'x'.repeat(33))),
    usage: rarely(fc.oneof(fc.constant({ prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 }), junk)),
    provider: junk,
  },
  { requiredKeys: [] },
);

describe('textChunk against ChunkSchema (property)', () => {
  it('accepts only what the schema accepts, as the same value in the same key order', () => {
    let accepted = 0;
    fc.assert(
      fc.property(chunk, (generated) => {
        // As an upstream's bytes arrive: through JSON.
        const json = JSON.parse(JSON.stringify(generated)) as Record<string, unknown>;
        const fast = textChunk(json);
        if (fast === undefined) return;
        accepted += 1;
        const bySchema = chunkBySchema(json);
        expect(bySchema).toStrictEqual(fast);
        expect(JSON.stringify(fast)).toBe(JSON.stringify(bySchema));
      }),
      { numRuns: 5_000 },
    );
    // Not vacuous: some 4% of the generated chunks (about 200) take the short way and are compared.
    expect(accepted).toBeGreaterThan(100);
  });

  it.each([
    [
      'a content chunk',
      { choices: [{ index: 0, delta: { content: ' word' }, logprobs: null, finish_reason: null }] },
    ],
    [
      'the first chunk',
      {
        choices: [
          { index: 0, delta: { role: 'assistant', content: '', refusal: null }, finish_reason: null },
        ],
      },
    ],
    [
      'the finish chunk',
      { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], system_fingerprint: 'fp_1' },
    ],
    [
      'the usage-only last chunk',
      {
        choices: [],
        system_fingerprint: 'fp_1',
        usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
      },
    ],
    [
      'a reasoning chunk',
      { choices: [{ delta: { reasoning: 'hm', content: null } }], service_tier: 'default' },
    ],
  ])('takes %s the short way, as the schema reads it', (_name, body) => {
    const fast = textChunk(body);
    expect(fast).toBeDefined();
    expect(fast).toStrictEqual(chunkBySchema(body));
  });

  it('leaves tool calls, logprobs and several choices to the schema, which parseChunkData then uses', () => {
    const calls = {
      choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"a"' } }] } }],
    };
    const withLogprobs = { choices: [{ delta: { content: 'a' }, logprobs: { content: [] } }] };
    const two = { choices: [{ delta: { content: 'a' } }, { index: 1, delta: { content: 'b' } }] };
    for (const body of [calls, withLogprobs, two]) {
      expect(textChunk(body)).toBeUndefined();
      const event = parseChunkData(JSON.stringify(body));
      expect(event).toStrictEqual({ kind: 'chunk', chunk: chunkBySchema(body), usage: undefined });
    }
  });
});

const message = fc.record(
  {
    role: mostly(fc.constantFrom('assistant', 'user', 'bot', '')),
    content: mostly(
      fc.oneof(
        fc.string({ maxLength: 12 }),
        fc.constant(null),
        fc.constant([{ type: 'text', text: 'a' }, { text: 'b' }]),
      ),
    ),
    refusal: text,
    reasoning: text,
    reasoning_content: text,
    tool_calls: rarely(
      fc.oneof(
        fc.constant([{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }]),
        junk,
      ),
    ),
    function_call: rarely(fc.oneof(fc.constant({ name: 'f', arguments: '{}' }), junk)),
    annotations: rarely(fc.oneof(fc.constant([]), junk)),
    reasoning_details: rarely(fc.oneof(fc.constant([{ type: 'reasoning.text', text: 'x' }]), junk)),
    audio: rarely(fc.oneof(fc.constant(null), junk)),
    provider_private: junk,
  },
  { requiredKeys: [] },
);

const completionChoice = fc.record(
  {
    index: mostly(fc.oneof(fc.integer({ min: -2, max: 1_030 }), fc.constantFrom(0.5, '0', null, 2 ** 53))),
    message: mostly(message),
    logprobs: fc.oneof(fc.constant(null), rarely(fc.oneof(fc.constant({ content: null }), junk))),
    finish_reason: mostly(
      fc.constantFrom(null, 'stop', 'length', 'tool_calls', 'end_turn', 'x'.repeat(32), 'x'.repeat(33)),
    ),
    native_finish_reason: junk,
  },
  { requiredKeys: [] },
);

const completion = fc.record(
  {
    id: fc.string({ maxLength: 8 }),
    object: fc.constant('chat.completion'),
    choices: mostly(
      fc.oneof(
        { arbitrary: fc.array(completionChoice, { minLength: 1, maxLength: 1 }), weight: 4 },
        { arbitrary: fc.array(completionChoice, { maxLength: 3 }), weight: 1 },
      ),
    ),
    system_fingerprint: mostly(fc.oneof(fc.string({ maxLength: 8 }), fc.constant('f'.repeat(257)))),
    service_tier: mostly(fc.constantFrom('default', 'auto', 'flex', 'x'.repeat(33))),
    usage: rarely(fc.oneof(fc.constant({ prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 }), junk)),
    provider: junk,
  },
  { requiredKeys: [] },
);

describe('textCompletion against CompletionSchema (property)', () => {
  it('accepts only what the schema accepts, as the same value in the same key order', () => {
    let accepted = 0;
    fc.assert(
      fc.property(completion, (generated) => {
        const json = JSON.parse(JSON.stringify(generated)) as Record<string, unknown>;
        const fast = textCompletion(json);
        if (fast === undefined) return;
        accepted += 1;
        const bySchema = completionBySchema(json);
        expect(bySchema).toStrictEqual(fast);
        expect(JSON.stringify(fast)).toBe(JSON.stringify(bySchema));
      }),
      { numRuns: 20_000 },
    );
    // Not vacuous: about 2.4% of the generated replies take the short way and are compared (466-489
    // of 20,000 in three runs; with 5,000 runs the count sat near this bound and failed a CI run).
    expect(accepted).toBeGreaterThan(100);
  });

  it.each([
    [
      'a text reply',
      {
        id: 'chatcmpl-1',
        object: 'chat.completion',
        created: 1,
        model: 'm',
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: 'Hello', refusal: null },
            finish_reason: 'stop',
          },
        ],
        usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 },
        system_fingerprint: 'fp_1',
      },
    ],
    [
      'a reasoning reply',
      { choices: [{ message: { content: 'a', reasoning: 'hm' }, finish_reason: 'length' }] },
    ],
    ['a refusal', { choices: [{ message: { content: null, refusal: 'no' } }], service_tier: 'default' }],
  ])('takes %s the short way, as the schema reads it', (_name, body) => {
    const fast = textCompletion(body);
    expect(fast).toBeDefined();
    expect(fast).toStrictEqual(completionBySchema(body));
  });

  it('leaves tool calls, content parts, logprobs and several choices to the schema, which parseCompletionBody then uses', () => {
    const calls = {
      choices: [
        {
          message: {
            content: null,
            tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }],
          },
          finish_reason: 'tool_calls',
        },
      ],
    };
    const parts = { choices: [{ message: { content: [{ type: 'text', text: 'a' }, { text: 'b' }] } }] };
    const withLogprobs = { choices: [{ message: { content: 'a' }, logprobs: { content: [] } }] };
    const two = { choices: [{ message: { content: 'a' } }, { index: 1, message: { content: 'b' } }] };
    for (const body of [calls, parts, withLogprobs, two]) {
      expect(textCompletion(body)).toBeUndefined();
      const parsed = parseCompletionBody(JSON.stringify(body));
      expect(parsed).toStrictEqual({ ok: true, completion: completionBySchema(body), usage: undefined });
    }
    expect(parseCompletionBody('{"choices":[]}')).toMatchObject({ ok: false });
    expect(parseCompletionBody('[1]')).toMatchObject({ ok: false });
  });
});
