import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { generateApiKey, hashKey, KEY_PATTERN, parseBearerKey } from '../../../functions/core/auth.js';
import {
  AuthenticationError,
  BadRequestError,
  InsufficientCreditsError,
} from '../../../functions/core/errors.js';
import { GENERATION_ID_PATTERN, newGenerationId } from '../../../functions/core/ids.js';
import { parseChatRequest } from '../../../functions/core/schemas.js';
import { JsonDecimal, stringifyJson } from '../../../functions/core/usage.js';
import { NODE22, runtimeInstalled } from '../../../lib/local/aws-lambda-ric.js';

const base = { model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }] };
const body = (extra: Record<string, unknown>) => JSON.stringify({ ...base, ...extra });

function badRequest(raw: string): BadRequestError {
  try {
    parseChatRequest(raw);
  } catch (error) {
    if (error instanceof BadRequestError) return error;
    throw error;
  }
  throw new Error('expected a 400');
}

describe('parseChatRequest', () => {
  it('accepts the message shapes OpenAI clients send', () => {
    const request = parseChatRequest(
      body({
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: [{ type: 'text', text: 'weather?' }] },
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get', arguments: '{}' } }],
          },
          { role: 'tool', tool_call_id: 'call_1', content: '{"t":20}' },
        ],
        tools: [
          { type: 'function', function: { name: 'get', parameters: { type: 'object', properties: {} } } },
        ],
        tool_choice: 'auto',
        temperature: 0,
        max_tokens: 5,
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    expect(request.messages).toHaveLength(4);
  });

  it.each([
    [body({ model: 'gpt-4o' }), 'model'],
    [JSON.stringify({ model: 'svc-fast' }), 'messages'],
    [body({ temperature: 2.5 }), 'temperature'],
    [body({ temperature: -0.1 }), 'temperature'],
    [body({ max_tokens: 0 }), 'max_tokens'],
    [body({ max_tokens: 1.5 }), 'max_tokens'],
    [body({ messages: [{ role: 'robot', content: 'x' }] }), 'messages[0].role'],
    [body({ messages: [{ role: 'tool', content: 'x' }] }), 'messages[0].tool_call_id'],
    [body({ messages: [{ role: 'user', content: 7 }] }), 'messages[0].content'],
    [body({ messages: [{ role: 'assistant', content: null }] }), 'messages[0].content'],
    [body({ tool_choice: 'sometimes' }), 'tool_choice'],
  ])('rejects %s naming %s', (raw, field) => {
    const error = badRequest(raw);
    expect(error.statusCode).toBe(400);
    expect(error.param).toBe(field);
    expect(error.message).toContain(field);
  });

  it('rejects a body that is not JSON or not an object', () => {
    expect(badRequest('{nope').code).toBe('invalid_json');
    expect(badRequest('[1]').code).toBe('invalid_json');
  });
});

describe('API keys', () => {
  it('generates keys in the spec format, identified by their hash', () => {
    const created = generateApiKey();
    expect(created.key).toMatch(KEY_PATTERN);
    expect(created.key).toHaveLength('svc_live_'.length + 43);
    expect(created.keyHash).toBe(hashKey(created.key));
    expect(created.displayPrefix).not.toContain(created.key.slice(13));
    expect(generateApiKey().key).not.toBe(created.key);
    // The stored form is SHA-256 hex of the whole key, as every key in the table was hashed
    // (Python's hashlib computed this one).
    expect(hashKey(`svc_live_${'A'.repeat(43)}`)).toBe(
      '248d7c93e7c5478d3536b2f70802ce95d0d6b3f0864c316f13d1b592caa3a527',
    );
  });

  it('parses the bearer header and rejects a missing or malformed key with 401', () => {
    const { key } = generateApiKey();
    expect(parseBearerKey(`Bearer ${key}`)).toBe(key);
    for (const header of [
      undefined,
      '',
      'Basic abc',
      `Bearer ${key}x`,
      'Bearer svc_live_short',
      `Bearer ${key.replace('svc_live_', 'svc_test_')}`,
    ]) {
      expect(() => parseBearerKey(header)).toThrow(AuthenticationError);
    }
  });
});

describe('generation ids and exact JSON money', () => {
  it('formats gen-<unix_seconds>-<suffix>', () => {
    const id = newGenerationId(1_767_225_600_123);
    expect(id).toMatch(GENERATION_ID_PATTERN);
    expect(id.startsWith('gen-1767225600-')).toBe(true);
    expect(id.length).toBeLessThanOrEqual(36);
  });

  it('draws generation ids from fresh randomness, uniform over base62, across refills of its pool', () => {
    // 2,000 ids take some 41,000 random bytes: ten refills of the 4 KiB pool.
    const ids = Array.from({ length: 2_000 }, () => newGenerationId(1_767_225_600_000));
    expect(new Set(ids).size).toBe(ids.length);
    const counts = new Map<string, number>();
    for (const id of ids) for (const char of id.slice(-20)) counts.set(char, (counts.get(char) ?? 0) + 1);
    expect(counts.size).toBe(62);
    // 40,000 characters, 645 expected of each: far outside these bounds only if some are favoured.
    for (const count of counts.values()) expect(count).toBeGreaterThan(500);
    for (const count of counts.values()) expect(count).toBeLessThan(800);
  });

  it('writes a decimal as a bare JSON number with its exact digits', () => {
    expect(stringifyJson({ cost: new JsonDecimal('0.00000035'), n: 1 })).toBe('{"cost":0.00000035,"n":1}');
    expect(JSON.parse(stringifyJson({ cost: new JsonDecimal('0.00000035') })).cost).toBe(3.5e-7);
  });

  // The functions run on Node 22, where JsonDecimal writes itself through JSON.rawJSON (this suite
  // runs on the machine's Node, which may lack it): the same digits, plain JSON.stringify included.
  it.runIf(runtimeInstalled())('writes the same exact digits on Node 22, through JSON.rawJSON', () => {
    const script = [
      "import { JsonDecimal, stringifyJson } from './functions/core/usage.js';",
      "const value = { cost: new JsonDecimal('0.000000035'), n: 1 };",
      'console.log(JSON.stringify([typeof JSON.rawJSON, stringifyJson(value), JSON.stringify(value)]));',
    ].join('\n');
    const out = execFileSync(NODE22, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: fileURLToPath(new URL('../../..', import.meta.url)),
      encoding: 'utf8',
    });
    const line = '{"cost":0.000000035,"n":1}';
    expect(JSON.parse(out)).toEqual(['function', line, line]);
  });
});

describe('an Authorization header with another scheme', () => {
  it.each(['Basic dXNlcjpwYXNz', 'Token svc_live_abc', 'ApiKey x'])(
    '%s: 401 saying to use Bearer',
    (header) => {
      expect(() => parseBearerKey(header)).toThrowError(/use "Authorization: Bearer <key>"/);
      try {
        parseBearerKey(header);
      } catch (error) {
        expect(error).toBeInstanceOf(AuthenticationError);
        expect((error as AuthenticationError).statusCode).toBe(401);
      }
    },
  );
});

describe('the 402 message matches its balance', () => {
  it.each([
    ['0', /is empty/],
    ['-0.000012', /is -0\.000012 USD: the last requests cost more than it held/],
  ])('balance %s', (balance, message) => {
    const error = new InsufficientCreditsError(balance, 'https://example.com/billing');
    expect(error.message).toMatch(message);
    expect(error.toBody()).toMatchObject({ balance: Number(balance), message: error.message });
  });
});
