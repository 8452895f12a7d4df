/**
 * The hand-checked request (simpleChatRequest) against the schema it shortcuts (ChatRequestSchema):
 * over generated request bodies, whatever it accepts the schema accepts too, as the same value with
 * the same key order (the order the upstream's body is written in), and what it declines is left to
 * the schema, which words every refusal. It must also take the requests most clients send, or it
 * saves nothing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BadRequestError } from '../../../functions/core/errors.js';
import { chatRequestBySchema, parseChatRequest, simpleChatRequest } from '../../../functions/core/schemas.js';
import { junk, mostly as mostlyOr, rarely as rarelyOr } from '../../support/arbitraries.js';

// Odds tuned so that about 5% of the generated bodies take the short way.
const mostly = <T>(usual: fc.Arbitrary<T>) => mostlyOr(usual, 24);
const rarely = <T>(value: fc.Arbitrary<T>) => rarelyOr(value, 8);
const sometimes = <T>(value: fc.Arbitrary<T>) => rarelyOr(value, 1);
/** Numbers at and around a range's ends, and some that no range takes. */
const around = (min: number, max: number) =>
  fc.oneof(
    fc.constantFrom(min, max, min - 0.001, max + 0.001, (min + max) / 2, -0, 2 ** 53, 1e308, -1e308),
    fc.double({ min: min - 1, max: max + 1, noNaN: true }),
    fc.integer({ min: Math.max(min - 2, -1e6), max: Math.min(max + 2, 1e6) }),
  );

const message = fc.record(
  {
    role: mostly(
      fc.oneof(
        { arbitrary: fc.constantFrom('system', 'user', 'assistant'), weight: 12 },
        { arbitrary: fc.constantFrom('developer', 'tool', 'function', 'bot', 'toString'), weight: 1 },
      ),
    ),
    content: mostly(
      fc.oneof(
        { arbitrary: fc.string({ maxLength: 12 }), weight: 24 },
        { arbitrary: fc.constant(null), weight: 1 },
        { arbitrary: fc.constant([{ type: 'text', text: 'a' }]), weight: 1 },
      ),
    ),
    name: rarely(mostly(fc.string({ maxLength: 6 }))),
    tool_call_id: rarely(mostly(fc.string({ maxLength: 6 }))),
    refusal: rarely(fc.oneof(fc.constant(null), fc.string({ maxLength: 4 }))),
    tool_calls: rarely(
      fc.constant([{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }]),
    ),
    function_call: rarely(fc.constant({ name: 'f', arguments: '{}' })),
    reasoning: rarely(fc.string({ maxLength: 4 })),
    cache_control: rarely(junk),
  },
  { requiredKeys: [] },
);

const request = fc.record(
  {
    top_k: rarely(junk),
    model: mostly(fc.constantFrom('svc-fast', 'svc-pro', 'svc-heavy', 'gpt-4o', 'SVC-FAST')),
    provider: rarely(junk),
    messages: mostly(
      fc.oneof(
        { arbitrary: fc.array(message, { minLength: 1, maxLength: 3 }), weight: 12 },
        { arbitrary: fc.constant([]), weight: 1 },
      ),
    ),
    stream: sometimes(mostly(fc.boolean())),
    stream_options: rarely(
      fc.oneof(
        fc.constant(null),
        fc.record(
          { include_usage: mostly(fc.boolean()), include_obfuscation: mostly(fc.boolean()), other: junk },
          { requiredKeys: [] },
        ),
      ),
    ),
    temperature: sometimes(fc.oneof(around(0, 2), fc.constant(null))),
    top_p: rarely(fc.oneof(around(0, 1), fc.constant(null))),
    max_tokens: sometimes(fc.oneof(around(1, 1_000_000), fc.constant(null))),
    max_completion_tokens: rarely(fc.oneof(around(1, 1_000_000), fc.constant(null))),
    n: rarely(fc.oneof(around(1, 1), fc.constant(null))),
    parallel_tool_calls: rarely(mostly(fc.boolean())),
    stop: rarely(
      fc.oneof(
        fc.constant(null),
        fc.string({ maxLength: 3 }),
        fc.array(mostly(fc.string({ maxLength: 3 })), { maxLength: 5 }),
      ),
    ),
    seed: rarely(fc.oneof(around(-5, 5), fc.constant(null))),
    frequency_penalty: rarely(fc.oneof(around(-2, 2), fc.constant(null))),
    presence_penalty: rarely(fc.oneof(around(-2, 2), fc.constant(null))),
    logprobs: rarely(mostly(fc.boolean())),
    top_logprobs: rarely(fc.oneof(around(0, 20), fc.constant(null))),
    user: rarely(
      mostly(
        fc.oneof(fc.string({ maxLength: 4 }), fc.constant('u'.repeat(256)), fc.constant('u'.repeat(257))),
      ),
    ),
    store: rarely(mostly(fc.boolean())),
    tools: rarely(fc.constant([{ type: 'function', function: { name: 'f' } }])),
    response_format: rarely(fc.constant({ type: 'json_object' })),
    metadata: rarely(fc.constant({ a: 'b' })),
  },
  { requiredKeys: [] },
);

/** The schema's reading, or undefined where it refuses. */
function bySchema(json: unknown) {
  try {
    return chatRequestBySchema(json);
  } catch (error) {
    expect(error).toBeInstanceOf(BadRequestError);
    return undefined;
  }
}

describe('simpleChatRequest against ChatRequestSchema (property)', () => {
  it('accepts only what the schema accepts, as the same value in the same key order', () => {
    let accepted = 0;
    let declinedValid = 0;
    fc.assert(
      fc.property(request, (generated) => {
        // As a client's bytes arrive: through JSON (which also drops the undefined fields).
        const json = JSON.parse(JSON.stringify(generated)) as Record<string, unknown>;
        const fast = simpleChatRequest(json);
        const schema = bySchema(json);
        if (fast === undefined) {
          if (schema !== undefined) declinedValid += 1;
          return;
        }
        accepted += 1;
        expect(schema).toStrictEqual(fast);
        expect(JSON.stringify(fast)).toBe(JSON.stringify(schema));
      }),
      { numRuns: 20_000 },
    );
    // Not vacuous: about 5% of the generated bodies (some 1,000) take the short way and are compared;
    // some the schema takes are left to it (tool calls, content parts, tools).
    expect(accepted).toBeGreaterThan(400);
    expect(declinedValid).toBeGreaterThan(0);
  });

  it.each([
    ['a one-message request', { model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }] }],
    [
      'an SDK stream with settings',
      {
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: 'hi', name: 'ann' },
          { role: 'assistant', content: 'hello', reasoning: 'r' },
          { role: 'tool', content: '{}', tool_call_id: 'call_1' },
          { role: 'developer', content: 'x' },
        ],
        model: 'svc-pro',
        stream: true,
        stream_options: { include_usage: true },
        temperature: 0.7,
        max_completion_tokens: 512,
        stop: ['\n\n'],
        top_k: 40,
        user: 'u-1',
      },
    ],
  ])('takes %s the short way, as the schema reads it', (_name, body) => {
    const fast = simpleChatRequest(body);
    expect(fast).toBeDefined();
    expect(fast).toStrictEqual(chatRequestBySchema(body));
    expect(JSON.stringify(fast)).toBe(JSON.stringify(chatRequestBySchema(body)));
  });

  it('leaves tools, content parts and a __proto__ key to the schema, which parseChatRequest then uses', () => {
    const withTools = {
      model: 'svc-fast',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [{ type: 'function', function: { name: 'f' } }],
      tool_choice: 'auto',
    };
    const withParts = {
      model: 'svc-fast',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
    };
    for (const body of [withTools, withParts]) {
      expect(simpleChatRequest(body)).toBeUndefined();
      expect(parseChatRequest(JSON.stringify(body))).toStrictEqual(chatRequestBySchema(body));
    }
    const proto =
      '{"model":"svc-fast","messages":[{"role":"user","content":"hi"}],"__proto__":{"polluted":1}}';
    expect(simpleChatRequest(JSON.parse(proto))).toBeUndefined();
    const parsed = parseChatRequest(proto);
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect(Object.keys(parsed)).toEqual(['model', 'messages']);
  });

  it('refuses as the schema words it when the short way declines a bad body', () => {
    const body = JSON.stringify({
      model: 'svc-fast',
      messages: [{ role: 'user', content: 'hi' }],
      temperature: 3,
    });
    expect(() => parseChatRequest(body)).toThrow(/temperature/);
    // JSON reads 1e999 as Infinity, which no range takes (and no JSON.stringify can produce).
    const infinite = '{"model":"svc-fast","messages":[{"role":"user","content":"hi"}],"max_tokens":1e999}';
    expect(simpleChatRequest(JSON.parse(infinite))).toBeUndefined();
    expect(() => parseChatRequest(infinite)).toThrow(/max_tokens/);
  });
});
