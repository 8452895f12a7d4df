import { describe, expect, it } from 'vitest';
import { chunkRewriter, isCompactContentChunk, rewriteParsed } from '../../../bench/chunk-splice.js';
import { relay } from '../../../functions/completions/relay.js';
import { stringifyJson } from '../../../functions/core/usage.js';

const envelope = { id: 'gen-1767225600-AAAAAAAAAAAAAAAAAAAA', created: 1_767_225_600, model: 'svc-fast' };

/** What today's relay forwards for one upstream chunk (the data of its first event after the keep-alive). */
async function relayed(data: string): Promise<{ forwarded: string | undefined; streamedText: string }> {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(`data: ${data}\n\ndata: [DONE]\n\n`));
      controller.close();
    },
  });
  let streamedText = '';
  const out = relay({
    body,
    generationId: envelope.id,
    tier: envelope.model,
    created: envelope.created,
    keepAliveMs: 10_000,
    idleTimeoutMs: 5_000,
    maxBytes: 1_000_000,
    abortUpstream: () => {},
    settle: async (outcome) => {
      streamedText = outcome.streamedText;
      return { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2, cost: 0 };
    },
  });
  let text = '';
  for await (const part of out) text += part.toString();
  const events = text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
  // The relay ends every stream with its own usage chunk and [DONE]; a forwarded chunk comes before.
  return { forwarded: events.length > 2 ? events[0] : undefined, streamedText };
}

const chunkOf = (choice: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    id: 'up-1',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'sim',
    choices: [choice],
    ...extra,
  });
const content = (text: string) => chunkOf({ index: 0, delta: { content: text }, finish_reason: null });

/** The relay tests' chunk shapes (test/unit/completions/relay.test.ts), plus the simulator's and OpenAI's. */
const compact: Record<string, string> = {
  'plain content': content('Hel'),
  'multi-byte content': content('héllo wörld ✓'),
  emoji: content('🙂'),
  'escaped quotes, backslash, newline, control character': content('say "hi"\\ \n\t\u0001'),
  'role and empty content (first chunk)': chunkOf({
    index: 0,
    delta: { role: 'assistant', content: '' },
    finish_reason: null,
  }),
  'simulator form (system_fingerprint, logprobs)': JSON.stringify({
    id: 'chatcmpl-sim',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'sim-fast',
    system_fingerprint: 'fp_simulator',
    choices: [{ index: 0, delta: { content: ' word' }, logprobs: null, finish_reason: null }],
  }),
  'OpenAI form with include_usage ("usage":null on every chunk)': JSON.stringify({
    id: 'chatcmpl-x',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'gpt-4o-mini',
    service_tier: 'default',
    system_fingerprint: 'fp_1',
    choices: [{ index: 0, delta: { content: 'Hi' }, logprobs: null, finish_reason: null }],
    usage: null,
  }),
};

const other: Record<string, string> = {
  'usage on a chunk that still has choices': chunkOf(
    { index: 0, delta: { content: 'x' }, finish_reason: null },
    { usage: { prompt_tokens: 9, completion_tokens: 1, total_tokens: 10 } },
  ),
  'tool call start': chunkOf({
    index: 0,
    delta: {
      role: 'assistant',
      content: null,
      tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get', arguments: '' } }],
    },
    finish_reason: null,
  }),
  'tool call arguments': chunkOf({
    index: 0,
    delta: { tool_calls: [{ index: 0, function: { arguments: '{"ci' } }] },
    finish_reason: null,
  }),
  'finish reason': chunkOf({ index: 0, delta: {}, finish_reason: 'tool_calls' }),
  'finish_reason missing (normalised to null)': chunkOf({ index: 0, delta: { content: 'a' } }),
  'envelope members missing and reordered': JSON.stringify({
    choices: [{ index: 0, delta: { content: 'z' }, finish_reason: null }],
    model: 'm',
  }),
  'refusal delta': chunkOf({ index: 0, delta: { refusal: 'no' }, finish_reason: null }),
  'reasoning delta': chunkOf({ index: 0, delta: { reasoning_content: 'think' }, finish_reason: null }),
};

describe('chunkRewriter', () => {
  it('takes the splice path for the compact content chunk forms, and the parse path for the rest', () => {
    for (const data of Object.values(compact)) expect(isCompactContentChunk(data), data).toBe(true);
    for (const data of Object.values(other)) expect(isCompactContentChunk(data), data).toBe(false);
  });

  for (const [name, data] of Object.entries({ ...compact, ...other })) {
    it(`forwards byte-identical JSON and the same delta text as the relay: ${name}`, async () => {
      const expected = await relayed(data);
      const result = chunkRewriter(envelope).rewrite(data);
      expect(result.kind).toBe('forward');
      if (result.kind !== 'forward') return;
      expect(result.json).toBe(expected.forwarded);
      expect(result.text).toBe(expected.streamedText);
    });
  }

  it('hands back the usage of a chunk that has both choices and usage, and the finish reason', () => {
    const result = chunkRewriter(envelope).rewrite(other['usage on a chunk that still has choices'] ?? '');
    expect(result.kind === 'forward' && result.usage).toMatchObject({
      usage: { promptTokens: 9, completionTokens: 1, cachedTokens: 0 },
    });
    const finished = chunkRewriter(envelope).rewrite(other['finish reason'] ?? '');
    expect(finished.kind === 'forward' && finished.finishReason).toBe('tool_calls');
  });

  it('reports a usage-only chunk with its usage, and does not forward it', () => {
    const data = stringifyJson({
      id: 'up-1',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'sim',
      choices: [],
      usage: {
        prompt_tokens: 4,
        completion_tokens: 2,
        total_tokens: 6,
        prompt_tokens_details: { cached_tokens: 1 },
      },
    });
    const result = chunkRewriter(envelope).rewrite(data);
    expect(result.kind).toBe('usage-only');
    expect(result.kind === 'usage-only' && result.usage).toMatchObject({
      usage: { promptTokens: 4, completionTokens: 2, cachedTokens: 1 },
    });
  });

  it('reports malformed chunks and mid-stream errors as the relay does', () => {
    const rewriter = chunkRewriter(envelope);
    expect(rewriter.rewrite('{not json').kind).toBe('malformed');
    expect(rewriter.rewrite('null').kind).toBe('malformed');
    expect(rewriter.rewrite(JSON.stringify({ error: { message: 'boom' } })).kind).toBe('error');
  });

  it('keeps the JSON value (not the spacing) of a chunk that is not compact', () => {
    const spaced = JSON.stringify(JSON.parse(compact['plain content'] ?? ''), null, 1);
    const result = chunkRewriter(envelope).rewrite(spaced);
    expect(result.kind === 'forward' && JSON.parse(result.json)).toEqual(
      JSON.parse((rewriteParsed(spaced, envelope) as { json: string }).json),
    );
  });

  it('escapes an envelope whose id or model needs escaping', () => {
    const odd = { id: 'gen-"x"', created: 2, model: 'svc\\fast' };
    const result = chunkRewriter(odd).rewrite(compact['plain content'] ?? '');
    expect(result.kind === 'forward' && JSON.parse(result.json)).toMatchObject({
      id: 'gen-"x"',
      model: 'svc\\fast',
    });
  });
});
