import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BadRequestError } from '../../../functions/core/errors.js';
import { toUpstreamBody } from '../../../functions/core/forwarding.js';
import { KNOWN_REQUEST_FIELDS, parseChatRequest } from '../../../functions/core/schemas.js';

/**
 * The request schema against OpenAI's own (the copy in test/contract/schemas/): every field it defines
 * is accepted, what SDKs echo back from upstream replies is accepted, and every bad body is a 400 that
 * names the field and the kind of problem.
 */
const openapi = JSON.parse(
  readFileSync(new URL('../../contract/schemas/openai-openapi-subset.json', import.meta.url), 'utf8'),
) as { components: { schemas: Record<string, { allOf?: unknown[]; properties?: Record<string, unknown> }> } };

function schemaProperties(name: string): string[] {
  const schema = openapi.components.schemas[name];
  if (!schema) return [];
  const names = Object.keys(schema.properties ?? {});
  for (const part of (schema.allOf ?? []) as { $ref?: string; properties?: Record<string, unknown> }[]) {
    if (part.$ref) names.push(...schemaProperties(part.$ref.split('/').at(-1) ?? ''));
    names.push(...Object.keys(part.properties ?? {}));
  }
  return [...new Set(names)];
}

const base = { model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }] };

/** A valid value for every request field of OpenAI's schema. */
const EXAMPLES: Record<string, unknown> = {
  model: 'svc-pro',
  messages: [{ role: 'user', content: 'hi' }],
  metadata: { team: 'search' },
  top_logprobs: 2,
  temperature: 0.7,
  top_p: 0.9,
  user: 'user-1234',
  safety_identifier: 'sid-1234',
  prompt_cache_key: 'cache-key-1',
  prompt_cache_retention: '24h',
  prompt_cache_options: { ttl: '30m' },
  service_tier: 'auto',
  modalities: ['text'],
  verbosity: 'low',
  reasoning_effort: 'xhigh',
  max_completion_tokens: 100,
  frequency_penalty: 0.5,
  presence_penalty: -0.5,
  web_search_options: { search_context_size: 'low' },
  response_format: {
    type: 'json_schema',
    json_schema: { name: 'x', schema: { type: 'object' }, strict: true },
  },
  audio: { voice: 'alloy', format: 'mp3' },
  store: false,
  moderation: { model: 'omni-moderation-latest' },
  stream: true,
  stop: ['\n'],
  logit_bias: { '50256': -100 },
  logprobs: true,
  max_tokens: 64,
  n: 1,
  prediction: { type: 'content', content: 'hello' },
  seed: 42,
  stream_options: { include_usage: true, include_obfuscation: false },
  tools: [
    { type: 'function', function: { name: 'get_weather', parameters: { type: 'object' }, strict: true } },
    { type: 'custom', custom: { name: 'grep', description: 'search', format: { type: 'text' } } },
  ],
  tool_choice: {
    type: 'allowed_tools',
    allowed_tools: { mode: 'auto', tools: [{ type: 'function', function: { name: 'get_weather' } }] },
  },
  parallel_tool_calls: true,
  function_call: 'auto',
  functions: [{ name: 'legacy', parameters: { type: 'object' } }],
};

describe('every request field of OpenAI schema', () => {
  const fields = schemaProperties('CreateChatCompletionRequest');

  it('has an example here (so a field added to the schema copy is tested here too)', () => {
    expect(fields.length).toBeGreaterThan(30);
    expect(fields.filter((f) => !(f in EXAMPLES))).toEqual([]);
  });

  it.each(fields)('accepts %s and knows it', (field) => {
    const parsed = parseChatRequest(JSON.stringify({ ...base, [field]: EXAMPLES[field] }));
    expect((parsed as Record<string, unknown>)[field]).toEqual(EXAMPLES[field]);
    expect(KNOWN_REQUEST_FIELDS.has(field)).toBe(true);
  });
});

describe('what OpenAI clients echo back from upstream replies', () => {
  it('accepts reasoning, reasoning_details, annotations, parsed, tool_calls[].index, tool names and cache_control', () => {
    const request = parseChatRequest(
      JSON.stringify({
        ...base,
        messages: [
          {
            role: 'system',
            content: [{ type: 'text', text: 'long context', cache_control: { type: 'ephemeral' } }],
          },
          { role: 'user', content: 'weather?' },
          {
            role: 'assistant',
            content: null,
            refusal: null,
            reasoning: null,
            reasoning_details: [{ type: 'reasoning.text', text: 'think' }],
            annotations: [],
            parsed: null,
            audio: null,
            tool_calls: [
              { index: 0, id: 'call_1', type: 'function', function: { name: 'get', arguments: '{}' } },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', name: 'get', content: '{"t":20}' },
        ],
        tools: [{ type: 'function', function: { name: 'get' } }],
      }),
    );
    expect(request.messages).toHaveLength(4);
  });

  it('accepts unknown top-level fields that OpenRouter- and LiteLLM-style clients send', () => {
    const request = parseChatRequest(
      JSON.stringify({
        ...base,
        provider: { order: ['a'] },
        transforms: [],
        top_k: 40,
        min_p: 0.1,
        repetition_penalty: 1.1,
      }),
    );
    expect((request as Record<string, unknown>).top_k).toBe(40);
  });
});

describe('forwarding', () => {
  const request = parseChatRequest(
    JSON.stringify({
      ...base,
      stream: true,
      top_k: 40,
      provider: { order: ['x'] },
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] },
        {
          role: 'assistant',
          content: 'ok',
          reasoning: 'hmm',
          parsed: null,
          tool_calls: [{ index: 0, id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }],
        },
      ],
    }),
  );

  it('forwards extra fields to a forward target, minus what no API accepts', () => {
    const { body, dropped } = toUpstreamBody(request, { model: 'up-model', extraFields: 'forward' });
    expect(dropped).toEqual([]);
    expect(body).toMatchObject({ model: 'up-model', top_k: 40, provider: { order: ['x'] } });
    expect(body.stream_options).toEqual({ include_usage: true });
    const [user, assistant] = body.messages as Record<string, unknown>[];
    expect((user?.content as Record<string, unknown>[] | undefined)?.[0]?.cache_control).toEqual({
      type: 'ephemeral',
    });
    expect(assistant?.reasoning).toBe('hmm');
    expect(assistant).not.toHaveProperty('parsed');
    expect((assistant?.tool_calls as Record<string, unknown>[] | undefined)?.[0]).not.toHaveProperty('index');
  });

  it('asks the upstream for usage whatever the client asked (the relay keeps the client its own shape)', () => {
    for (const stream_options of [
      undefined,
      null,
      { include_usage: false },
      { include_obfuscation: false },
    ]) {
      const asked = parseChatRequest(JSON.stringify({ ...base, stream: true, stream_options }));
      const { body } = toUpstreamBody(asked, { model: 'up-model', extraFields: 'forward' });
      expect(body.stream_options).toEqual({ ...(stream_options ?? {}), include_usage: true });
    }
    const json = parseChatRequest(JSON.stringify({ ...base, stream_options: { include_usage: true } }));
    expect(toUpstreamBody(json, { model: 'up-model', extraFields: 'forward' }).body).not.toHaveProperty(
      'stream_options',
    );
  });

  it('drops them for a drop target and names what it dropped', () => {
    const { body, dropped } = toUpstreamBody(request, { model: 'gpt-4o', extraFields: 'drop' });
    expect(dropped).toEqual([
      'messages[].content[].cache_control',
      'messages[].reasoning',
      'provider',
      'top_k',
    ]);
    expect(body).not.toHaveProperty('top_k');
    const [user, assistant] = body.messages as Record<string, unknown>[];
    expect((user?.content as Record<string, unknown>[] | undefined)?.[0]).toEqual({
      type: 'text',
      text: 'hi',
    });
    expect(assistant).not.toHaveProperty('reasoning');
  });
});

function badRequest(raw: unknown): BadRequestError {
  try {
    parseChatRequest(JSON.stringify(raw));
  } catch (error) {
    if (error instanceof BadRequestError) return error;
    throw error;
  }
  throw new Error(`expected a 400 for ${JSON.stringify(raw)}`);
}

describe('exact 400s', () => {
  it.each([
    [
      { messages: base.messages },
      'model',
      'missing_required_parameter',
      /Missing required parameter: 'model'/,
    ],
    [{ ...base, temperature: 'hot' }, 'temperature', 'invalid_type', /expected number, but got a string/],
    [{ ...base, user: null }, 'user', 'invalid_type', /expected string, but got null/],
    [{ ...base, tools: null }, 'tools', 'invalid_type', /expected array, but got null/],
    [{ ...base, metadata: { a: 1 } }, 'metadata.a', 'invalid_type', /expected string, but got an integer/],
    [
      { ...base, temperature: 3 },
      'temperature',
      'out_of_range',
      /^Invalid 'temperature': 3, above the maximum of 2\.$/,
    ],
    [{ ...base, n: 2 }, 'n', 'out_of_range', /above the maximum of 1 \(one choice per request\)/],
    [{ ...base, model: 'gpt-4o' }, 'model', 'invalid_value', /'svc-fast', 'svc-pro', 'svc-heavy'/],
    [{ ...base, reasoning_effort: 'extreme' }, 'reasoning_effort', 'invalid_value', /"extreme"/],
    [
      {
        ...base,
        tools: [{ type: 'function', function: { name: 'a' } }],
        tool_choice: { type: 'function', function: { name: 'b' } },
      },
      'tool_choice',
      'invalid_value',
      /"b", which is not in tools/,
    ],
    [
      { ...base, messages: [{ content: 'x' }] },
      'messages[0].role',
      'missing_required_parameter',
      /'messages\[0\].role'/,
    ],
    [
      { ...base, messages: [{ role: 'robot', content: 'x' }] },
      'messages[0].role',
      'invalid_value',
      /"robot"\. Supported values are: 'system', 'developer', 'user', 'assistant', 'tool', 'function'/,
    ],
    [
      { ...base, messages: [{ role: 7, content: 'x' }] },
      'messages[0].role',
      'invalid_type',
      /expected string, but got an integer/,
    ],
    [
      { ...base, tools: [{ type: 'x' }] },
      'tools[0].type',
      'invalid_value',
      /"x"\. Supported values are: 'function', 'custom'/,
    ],
  ])('%j: %s is %s', (raw, param, code, message) => {
    const error = badRequest(raw);
    expect(error.statusCode).toBe(400);
    expect(error.param).toBe(param);
    expect(error.code).toBe(code);
    expect(error.message).toMatch(message);
    expect(error.toBody()).toEqual({
      error: { message: error.message, type: 'invalid_request_error', param, code },
    });
  });

  /** Generated bad bodies: one field spoiled in one of four ways; the 400 must say which and how. */
  const numeric = [
    ['temperature', 0, 2],
    ['top_p', 0, 1],
    ['frequency_penalty', -2, 2],
    ['presence_penalty', -2, 2],
    ['top_logprobs', 0, 20],
    // No upper bound of their own (the tier bounds what is billed): only below the minimum.
    ['max_tokens', 1, Number.POSITIVE_INFINITY],
    ['max_completion_tokens', 1, Number.POSITIVE_INFINITY],
  ] as const;
  const enums = ['model', 'reasoning_effort', 'verbosity', 'prompt_cache_retention'] as const;
  const typed = [
    'stream',
    'user',
    'logprobs',
    'parallel_tool_calls',
    'store',
    'seed',
    'messages',
    'tools',
    'stop',
  ] as const;
  const wrongValues = fc.oneof(
    fc.string().map((s) => `${s}x`),
    fc.constant(null),
    fc.array(fc.integer(), { maxLength: 2 }),
    fc.dictionary(fc.string(), fc.integer(), { maxKeys: 2 }),
  );

  it('names the field and the kind of problem for generated bad bodies (property)', () => {
    const spoilers = fc.oneof(
      fc.constantFrom('model', 'messages').map((field) => {
        const { [field]: _gone, ...rest } = { ...base, model: base.model };
        return { body: rest, param: field, code: 'missing_required_parameter' };
      }),
      fc
        .tuple(fc.constantFrom(...numeric), fc.boolean(), fc.integer({ min: 1, max: 1_000_000 }))
        .map(([[field, min, max], below, by]) => ({
          body: { ...base, [field]: below || max === Number.POSITIVE_INFINITY ? min - by : max + by },
          param: field,
          code: 'out_of_range',
        })),
      fc
        .tuple(fc.constantFrom(...enums), fc.string({ minLength: 1, maxLength: 12 }))
        .map(([field, value]) => ({
          body: { ...base, [field]: `nope-${value}` },
          param: field,
          code: 'invalid_value',
        })),
      fc
        .tuple(fc.constantFrom(...typed), wrongValues)
        .filter(([field, value]) => {
          // Values of the right type are not spoilers; null is accepted where the schema allows it.
          if (value === null) return ['user', 'parallel_tool_calls', 'messages', 'tools'].includes(field);
          if (typeof value === 'string') return field !== 'user' && field !== 'stop';
          if (field === 'stop')
            return typeof value !== 'string' && !(Array.isArray(value) && value.length === 0);
          if (field === 'messages' || field === 'tools') return !Array.isArray(value) || value.length > 0;
          return true;
        })
        .map(([field, value]) => ({ body: { ...base, [field]: value }, param: field, code: 'invalid_type' })),
      // A tagged shape (a message's role, a tool's type) absent, mistyped or unknown, at a generated index.
      fc
        .tuple(
          fc.nat({ max: 3 }),
          fc.oneof(
            fc.constant({ value: undefined, code: 'missing_required_parameter' }),
            fc
              .oneof(fc.integer(), fc.boolean(), fc.constant(null))
              .map((value) => ({ value, code: 'invalid_type' })),
            fc.string({ maxLength: 10 }).map((value) => ({ value: `bot-${value}`, code: 'invalid_value' })),
          ),
          fc.constantFrom(['messages', 'role'], ['tools', 'type']),
        )
        .map(([at, { value, code }, [list, tag]]) => {
          const good =
            list === 'messages'
              ? { role: 'user', content: 'hi' }
              : { type: 'function', function: { name: 'f' } };
          const items: Record<string, unknown>[] = Array.from({ length: at + 1 }, () => ({ ...good }));
          const spoiled = { ...good, [tag as string]: value };
          if (value === undefined) delete spoiled[tag as keyof typeof spoiled];
          items[at] = spoiled;
          return { body: { ...base, [list as string]: items }, param: `${list}[${at}].${tag}`, code };
        }),
    );
    fc.assert(
      fc.property(spoilers, ({ body, param, code }) => {
        const error = badRequest(body);
        expect(error.param?.startsWith(param)).toBe(true);
        expect(error.code).toBe(code);
        expect(error.message).toContain(param);
      }),
      { numRuns: 300 },
    );
  });
});

describe('a 400 is bounded whatever the client sent', () => {
  it('long keys and values in bad bodies give short messages (property)', () => {
    const long = fc.string({ minLength: 100, maxLength: 5_000 });
    const bodies = fc.oneof(
      long.map((key) => ({ ...base, metadata: { [key]: 1 } })),
      long.map((name) => ({
        ...base,
        tools: [{ type: 'function', function: { name: 'a' } }],
        tool_choice: { type: 'function', function: { name } },
      })),
      long.map((name) => ({ ...base, function_call: { name } })),
      long.map((model) => ({ ...base, model })),
      long.map((role) => ({ ...base, messages: [{ role, content: 'x' }] })),
      long.map((key) => ({ ...base, logit_bias: { [key]: 'x' } })),
    );
    fc.assert(
      fc.property(bodies, (body) => {
        const error = badRequest(body);
        expect(error.message.length).toBeLessThanOrEqual(400);
        expect(error.param?.length ?? 0).toBeLessThanOrEqual(100);
      }),
      { numRuns: 200 },
    );
  });
});

describe('messages that say exactly what is wrong (field, rule, value)', () => {
  function badRaw(text: string): BadRequestError {
    try {
      parseChatRequest(text);
    } catch (error) {
      if (error instanceof BadRequestError) return error;
      throw error;
    }
    throw new Error(`expected a 400 for ${text}`);
  }
  const body = (field: string) => `{"model":"svc-fast","messages":[{"role":"user","content":"hi"}],${field}}`;

  it.each([
    [body('"max_tokens":0'), 'max_tokens', /^Invalid 'max_tokens': 0, below the minimum of 1\.$/],
    [
      body('"max_completion_tokens":-3'),
      'max_completion_tokens',
      /^Invalid 'max_completion_tokens': -3, below the minimum of 1\.$/,
    ],
    [
      body('"temperature":1e400'),
      'temperature',
      /^Invalid 'temperature': the number is too large to represent; expected a finite number\.$/,
    ],
    [
      '{"model":"svc-fast","messages":[]}',
      'messages',
      /^Invalid 'messages': 0 items; at least 1 is required\.$/,
    ],
  ])('%s', (text, param, message) => {
    const error = badRaw(text);
    expect(error.param).toBe(param);
    expect(error.message).toMatch(message);
  });
});

describe('hostile bodies', () => {
  it('keeps a __proto__ key out of the parsed request and its prototype', () => {
    const proto =
      '{"model":"svc-fast","messages":[{"role":"user","content":"hi"}],"__proto__":{"polluted":1}}';
    const parsed = parseChatRequest(proto);
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect(Object.keys(parsed)).toEqual(['model', 'messages']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('refuses a number JSON reads as Infinity (1e999) as out of range, naming the field', () => {
    const infinite = '{"model":"svc-fast","messages":[{"role":"user","content":"hi"}],"max_tokens":1e999}';
    expect(() => parseChatRequest(infinite)).toThrow(BadRequestError);
    expect(() => parseChatRequest(infinite)).toThrow(/max_tokens/);
  });
});
