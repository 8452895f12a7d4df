/**
 * Forwarding over generated requests: whatever extra field names a client sends, a drop target never
 * receives them, every dropped name is reported, and the report is a valid HTTP header value (a name
 * that is not printable ASCII must not turn into a 5xx when the header is set); and whatever JSON a
 * client nests in a forwarded field, the request is either a 400 or serialisable for the upstream.
 */
import { validateHeaderValue } from 'node:http';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BadRequestError } from '../../../functions/core/errors.js';
import { toUpstreamBody } from '../../../functions/core/forwarding.js';
import { KNOWN_REQUEST_FIELDS, MAX_JSON_DEPTH, parseChatRequest } from '../../../functions/core/schemas.js';

const base = { model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }] };
const extraName = fc
  .oneof(fc.string({ minLength: 1, maxLength: 80 }), fc.string({ unit: 'grapheme', minLength: 1 }))
  .filter((name) => !KNOWN_REQUEST_FIELDS.has(name) && name !== '__proto__');

describe('toUpstreamBody over generated extra fields (property)', () => {
  it('a drop target gets none of them and the header naming them is valid', () => {
    fc.assert(
      fc.property(fc.uniqueArray(extraName, { minLength: 1, maxLength: 5 }), (names) => {
        const raw = { ...base, ...Object.fromEntries(names.map((n) => [n, 1])) };
        const request = parseChatRequest(JSON.stringify(raw));
        const { body, dropped } = toUpstreamBody(request, { model: 'up', extraFields: 'drop' });
        for (const name of names) expect(Object.hasOwn(body, name)).toBe(false);
        expect(dropped).toHaveLength(names.length);
        expect(() => validateHeaderValue('x-dropped-fields', dropped.join(', '))).not.toThrow();
        for (const name of dropped) expect(name).not.toContain(',');
      }),
      { numRuns: 300 },
    );
  });

  it('a forward target gets every one of them as sent', () => {
    fc.assert(
      fc.property(fc.uniqueArray(extraName, { minLength: 1, maxLength: 5 }), (names) => {
        const raw = { ...base, ...Object.fromEntries(names.map((n) => [n, { v: n }])) };
        const { body, dropped } = toUpstreamBody(parseChatRequest(JSON.stringify(raw)), {
          model: 'up',
          extraFields: 'forward',
        });
        expect(dropped).toEqual([]);
        for (const name of names) expect(body[name]).toEqual({ v: name });
      }),
      { numRuns: 300 },
    );
  });

  it('percent-encodes a name that is not printable ASCII', () => {
    const request = parseChatRequest(JSON.stringify({ ...base, 'a\nb': 1, é: 2, 'x,y': 3, top_k: 4 }));
    expect(toUpstreamBody(request, { model: 'up', extraFields: 'drop' }).dropped).toEqual([
      '%C3%A9',
      'a%0Ab',
      'top_k',
      'x%2Cy',
    ]);
  });
});

/** `[[[...{}...]]]` with `levels` containers in all. */
const nested = (levels: number) => `${'['.repeat(levels - 1)}{}${']'.repeat(levels - 1)}`;
const withProvider = (json: string) =>
  `{"model":"svc-fast","messages":[{"role":"user","content":"hi"}],"provider":${json}}`;

describe('nesting depth', () => {
  it(`accepts a body nested ${MAX_JSON_DEPTH} levels deep and serialises it for the upstream`, () => {
    // The body object is level 1, provider level 2.
    const request = parseChatRequest(withProvider(nested(MAX_JSON_DEPTH - 1)));
    expect(JSON.stringify(toUpstreamBody(request, { model: 'up', extraFields: 'forward' }).body)).toContain(
      '[[',
    );
  });

  it.each([
    [MAX_JSON_DEPTH, 'provider[0][0][0]'],
    [1_000_000, 'provider[0][0][0]'],
  ])('a body nested past the limit (provider %i levels) is a 400 naming %s', (levels, param) => {
    let error: unknown;
    try {
      parseChatRequest(withProvider(nested(levels)));
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(BadRequestError);
    expect((error as BadRequestError).param).toBe(param);
    expect((error as BadRequestError).code).toBe('out_of_range');
    expect((error as BadRequestError).message).toContain(`deeper than ${MAX_JSON_DEPTH} levels`);
  });

  it('brackets inside strings do not count', () => {
    const text = JSON.stringify('[{'.repeat(10_000));
    expect(parseChatRequest(withProvider(text))).toHaveProperty('provider');
  });

  it('any JSON in a forwarded field: a 400 or a body the upstream adapter can serialise (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 80 }), fc.boolean(), (value, onMessage) => {
        const raw = onMessage
          ? { ...base, messages: [{ role: 'user', content: 'hi', reasoning_details: value }] }
          : { ...base, provider: value };
        try {
          const request = parseChatRequest(JSON.stringify(raw));
          JSON.stringify(toUpstreamBody(request, { model: 'up', extraFields: 'forward' }).body);
        } catch (error) {
          expect(error).toBeInstanceOf(BadRequestError);
        }
      }),
      { numRuns: 200 },
    );
  });
});

describe('a field named __proto__', () => {
  it('is never forwarded and never becomes the prototype of what is sent', () => {
    const request = parseChatRequest(
      `{"model":"svc-fast","messages":[{"role":"user","content":"hi"}],"__proto__":{"polluted":true}}`,
    );
    const { body } = toUpstreamBody(request, { model: 'up', extraFields: 'forward' });
    expect(Object.getPrototypeOf(body)).toBe(Object.prototype);
    expect((body as { polluted?: unknown }).polluted).toBeUndefined();
    expect(JSON.stringify(body)).not.toContain('polluted');
  });
});
