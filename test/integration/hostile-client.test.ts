import { request } from 'node:http';
import { gunzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usdToNano } from '../../functions/core/money.js';
import { balanceNano, newAccount, startTarget, type Target } from '../support/target.js';

/**
 * Whatever a client sends (any method, path, header or body, well-formed or not) is answered with a
 * 2xx or a 4xx carrying an OpenAI-shaped error (402 the spec's flat body), never a 5xx; and the
 * account pays exactly the costs its 200 replies announced, nothing for the rest. The client sends
 * one request at a time, so it is never refused for credit held by a request of its own (some of
 * its requests, `max_tokens` in the millions, hold more than its balance). Requests are generated (fast-check, a fresh seed
 * each run: a failure prints the seed that reproduces it) and sent as raw HTTP, so a body can be any
 * bytes.
 */
let target: Target;
let account: { accountId: string; key: string };
beforeAll(async () => {
  target = await startTarget();
  account = await newAccount(target, '100');
});
afterAll(async () => {
  await target?.stop();
});

const FIELDS = [
  'model',
  'messages',
  'stream',
  'stream_options',
  'max_tokens',
  'max_completion_tokens',
  'temperature',
  'top_p',
  'n',
  'stop',
  'tools',
  'tool_choice',
  'response_format',
  'logprobs',
  'top_logprobs',
  'seed',
  'user',
  'metadata',
  'reasoning',
  'usage',
  'logit_bias',
  'provider',
  'models',
  '__proto__',
  'constructor',
];

const oddStrings = fc.constantFrom(
  '',
  ' ',
  '\u0000',
  '\ud800',
  '😀'.repeat(300),
  '%ZZ',
  '../x',
  'é',
  'x'.repeat(20_000),
);
const oddNumbers = fc.constantFrom(0, -0, -1, 1.5, 2 ** 31, 2 ** 53 + 1, 1e308, -1e308, 1e-320);
const value = fc.oneof(oddStrings, oddNumbers, fc.jsonValue({ maxDepth: 3 }));

/** Values near what a field takes, in range and just out of it, so that many runs pass the schema. */
const near = new Map<string, fc.Arbitrary<unknown>>(
  Object.entries({
    temperature: fc.double({ min: -1, max: 3, noNaN: true }),
    top_p: fc.double({ min: -0.5, max: 1.5, noNaN: true }),
    max_tokens: fc.integer({ min: -2, max: 64 }),
    max_completion_tokens: fc.integer({ min: -2, max: 64 }),
    n: fc.integer({ min: 0, max: 3 }),
    top_logprobs: fc.integer({ min: -1, max: 25 }),
    seed: fc.integer(),
    stream: fc.boolean(),
    logprobs: fc.boolean(),
    stop: fc.oneof(fc.string({ maxLength: 8 }), fc.array(fc.string({ maxLength: 8 }), { maxLength: 5 })),
    user: fc.string({ maxLength: 40 }),
    tool_choice: fc.constantFrom('auto', 'none', 'required', { type: 'function', function: { name: 'f' } }),
    response_format: fc.constantFrom({ type: 'text' }, { type: 'json_object' }, { type: 'json_schema' }),
    stream_options: fc.record({ include_usage: fc.boolean() }),
    reasoning: fc.record({ effort: fc.constantFrom('low', 'medium', 'high', 'none', 'x') }),
    logit_bias: fc.dictionary(
      fc.integer({ min: 0, max: 100_000 }).map(String),
      fc.integer({ min: -150, max: 150 }),
      {
        maxKeys: 3,
      },
    ),
    model: fc.constantFrom('svc-fast', 'svc-pro', 'svc-heavy', 'gpt-4o', ''),
  }),
);
const fieldValue = (field: string) => {
  const close = near.get(field);
  return close ? fc.oneof({ weight: 3, arbitrary: close }, value) : value;
};

const valid = (stream: boolean) => ({
  model: 'svc-fast',
  messages: [{ role: 'user', content: 'hi [[sim:tokens=3]]' }],
  max_tokens: 16,
  ...(stream ? { stream: true } : {}),
});

/** A valid client's request with one to three fields changed, mostly to values near what they take. */
const oddFields = fc
  .tuple(
    fc.boolean(),
    fc.uniqueArray(
      fc
        .constantFrom(...FIELDS)
        .chain((field) =>
          fc.tuple(fc.constant(field), fc.option(fieldValue(field), { nil: undefined, freq: 8 })),
        ),
      { minLength: 1, maxLength: 3, selector: ([field]) => field },
    ),
  )
  .map(([stream, changes]) => {
    const b: Record<string, unknown> = valid(stream);
    for (const [field, replacement] of changes) {
      if (replacement === undefined) delete b[field];
      else b[field] = replacement;
    }
    return JSON.stringify(b);
  });

const body = fc.oneof(
  // Valid, for the money check: enough of the runs must reach the model.
  { weight: 4, arbitrary: fc.boolean().map((stream) => JSON.stringify(valid(stream))) },
  { weight: 6, arbitrary: oddFields },
  // A valid request with odd messages.
  fc
    .tuple(
      fc.boolean(),
      fc.array(fc.record({ role: value, content: value }, { requiredKeys: [] }), { maxLength: 3 }),
    )
    .map(([stream, messages]) => JSON.stringify({ ...valid(stream), messages })),
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 200 }),
  fc.uint8Array({ maxLength: 200 }).map((bytes) => Buffer.from(bytes)),
  fc.constantFrom('', '{', '{"model":', '['.repeat(50_000) + ']'.repeat(50_000)),
);

const path = fc.oneof(
  { weight: 20, arbitrary: fc.constant('/chat/completions') },
  fc.constantFrom(
    '/chat/completions/',
    '/chat/completions?x=%ZZ',
    '//chat/completions',
    '/models',
    '/models/svc-fast',
    '/models/%ff%fe',
    `/models/${'a'.repeat(3_000)}`,
    '/credits',
    '/generation',
    '/generation?id=',
    '/generation?id=gen-1-%00',
    `/generation?id=${'g'.repeat(2_000)}`,
    '/%2e%2e/models',
    '/nowhere',
  ),
);

const headers = fc.record({
  authorization: fc.oneof(
    { weight: 6, arbitrary: fc.constant('Bearer valid') },
    fc.constantFrom(
      '',
      'Bearer',
      'Bearer ',
      'bearer valid',
      'Basic valid',
      'Bearer validx',
      `Bearer ${'a'.repeat(5_000)}`,
    ),
  ),
  'content-type': fc.constantFrom(
    'application/json',
    'application/json; charset=utf-8',
    'text/plain',
    'application/x-www-form-urlencoded',
    undefined,
  ),
  'accept-encoding': fc.constantFrom(undefined, 'gzip', 'gzip;q=abc', '*;q=0', 'br', 'identity;q=0', ',,,'),
  'content-encoding': fc.option(fc.constantFrom('gzip', 'br'), { freq: 10, nil: undefined }),
});

const method = fc.oneof(
  { weight: 8, arbitrary: fc.constant('POST') },
  fc.constantFrom('GET', 'PUT', 'DELETE', 'OPTIONS', 'HEAD', 'PATCH'),
);

interface Answer {
  status: number;
  contentType: string;
  text: string;
}

function send(
  m: string,
  p: string,
  h: Record<string, string | undefined>,
  b: string | Buffer,
): Promise<Answer> {
  const base = new URL(target.baseUrl);
  const sent: Record<string, string> = {};
  for (const [name, v] of Object.entries(h)) {
    if (v === undefined) continue;
    sent[name] = name === 'authorization' ? v.replace('valid', account.key) : v;
  }
  const withBody = m !== 'GET' && m !== 'HEAD';
  if (withBody) sent['content-length'] = String(Buffer.byteLength(b));
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: base.hostname,
        port: base.port,
        method: m,
        path: `${base.pathname}${p}`,
        headers: sent,
        agent: false,
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (piece: Buffer) => parts.push(piece));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            contentType: String(res.headers['content-type'] ?? ''),
            text: (res.headers['content-encoding'] === 'gzip' ? gunzipSync : (x: Buffer) => x)(
              Buffer.concat(parts),
            ).toString(),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.setTimeout(60_000, () => req.destroy(new Error('no answer in 60 s')));
    req.end(withBody ? b : undefined);
  });
}

/** The cost a 200 reply to POST /chat/completions announced: the JSON body's, or a stream's last usage. */
function announcedCost(answer: Answer): bigint {
  if (answer.contentType.startsWith('text/event-stream')) {
    let cost: number | undefined;
    for (const line of answer.text.split('\n')) {
      if (!line.startsWith('data: {')) continue;
      const usage = (JSON.parse(line.slice(6)) as { usage?: { cost?: number } }).usage;
      if (usage?.cost !== undefined) cost = usage.cost;
    }
    if (cost === undefined) throw new Error(`a stream without a final cost: ${answer.text.slice(-300)}`);
    return usdToNano(String(cost));
  }
  const cost = (JSON.parse(answer.text) as { usage?: { cost?: number } }).usage?.cost;
  if (cost === undefined) throw new Error(`a reply without a cost: ${answer.text.slice(0, 300)}`);
  return usdToNano(String(cost));
}

/** Sends one request and checks its answer; counts the statuses and the costs announced. */
function checker() {
  const seen = { announced: 0n, statuses: {} as Record<number, number> };
  const check = async (m: string, p: string, h: Record<string, string | undefined>, b: string | Buffer) => {
    const answer = await send(m, p, h, b);
    seen.statuses[answer.status] = (seen.statuses[answer.status] ?? 0) + 1;
    const said = `${m} ${p} ${typeof b === 'string' ? b.slice(0, 300) : '(bytes)'} -> ${answer.text.slice(0, 300)}`;
    expect(answer.status, said).toBeLessThan(500);
    if (answer.status >= 400 && m !== 'HEAD') {
      const error = JSON.parse(answer.text) as { error?: { message?: unknown }; message?: unknown };
      // 402 has the spec's flat body ({error, balance, message, topUpUrl}); every other error the OpenAI shape.
      expect(typeof (answer.status === 402 ? error.message : error.error?.message), said).toBe('string');
    }
    if (answer.status === 200 && m === 'POST' && p.startsWith('/chat/completions'))
      seen.announced += announcedCost(answer);
  };
  return { seen, check };
}

describe('a hostile client', () => {
  it('never gets a 5xx, gets OpenAI-shaped errors, and pays exactly the costs of its 200 replies', async () => {
    const before = await balanceNano(target, account.accountId);
    const { seen, check } = checker();
    // Anything: method, path, headers and body.
    await fc.assert(fc.asyncProperty(method, path, headers, body, check), { numRuns: 150 });
    // A client that gets the envelope right and the fields wrong: every run reaches the request's parse.
    const json = { authorization: 'Bearer valid', 'content-type': 'application/json' };
    await fc.assert(
      fc.asyncProperty(oddFields, (b) => check('POST', '/chat/completions', json, b)),
      { numRuns: 500 },
    );
    // Enough of the runs reached the model for the money check to mean something.
    expect(seen.statuses[200] ?? 0).toBeGreaterThan(30);
    // One request at a time on a funded account: never refused for credit.
    expect(seen.statuses[402]).toBeUndefined();
    expect(before - (await balanceNano(target, account.accountId))).toBe(seen.announced);
  }, 240_000);
});
