/**
 * The relayed chunk's SSE line built from its envelope's head (chunkLine) against what it replaces:
 * `JSON.stringify` of the whole chunk with our envelope spread in. Over generated chunks (any
 * strings, unicode and escapes included; fields absent, null or set) the two are the same bytes.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chunkEnvelope, chunkLine, envelopeHead } from '../../../functions/completions/relay.js';

const anyString = fc.string({ unit: 'binary', maxLength: 24 });
const optional = <T>(value: fc.Arbitrary<T>) =>
  fc.oneof(fc.constant(undefined), fc.constant(null), value as fc.Arbitrary<unknown>);

describe('chunkLine', () => {
  it('writes the bytes JSON.stringify writes for the chunk with its envelope', () => {
    fc.assert(
      fc.property(
        anyString,
        fc.integer({ min: 0, max: 2 ** 40 }),
        anyString,
        optional(anyString),
        optional(fc.constantFrom('auto', 'default', 'flex', 'scale', 'priority')),
        fc.array(
          fc.record({
            index: fc.nat(5),
            delta: fc.record({ content: optional(anyString), role: optional(fc.constant('assistant')) }),
            logprobs: optional(fc.constant({ content: null, refusal: null })),
            finish_reason: optional(fc.constantFrom('stop', 'length', 'tool_calls')),
          }),
          { maxLength: 3 },
        ),
        (id, created, model, system_fingerprint, service_tier, choices) => {
          const envelope = chunkEnvelope({ generationId: id, created, tier: model });
          const expected = `data: ${JSON.stringify({
            ...envelope,
            ...(system_fingerprint !== undefined ? { system_fingerprint } : {}),
            ...(service_tier !== undefined ? { service_tier } : {}),
            choices,
          })}\n\n`;
          const chunk = { system_fingerprint, service_tier, choices } as Parameters<typeof chunkLine>[1];
          expect(chunkLine(envelopeHead(envelope), chunk)).toBe(expected);
          expect(JSON.parse(expected.slice(6))).toMatchObject({
            id,
            object: 'chat.completion.chunk',
            created,
            model,
          });
        },
      ),
      { numRuns: 3_000 },
    );
  });
});
