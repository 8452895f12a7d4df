import { constants, gunzipSync } from 'node:zlib';
import { describe, expect, it, vi } from 'vitest';
import { relay } from '../../../functions/completions/relay.js';
import type { Compressor, RelayOutcome } from '../../../functions/completions/relay-options.js';
import { stringifyJson } from '../../../functions/core/usage.js';
import { SyncGzip } from '../../../functions/shared/compression.js';
import { FIXED_USAGE, relayFinishedAtFixedUsage, relayOptions } from '../../support/relay-options.js';
import { upstreamEventsFrom } from '../../support/upstream-events.js';

/** Feeds the relay an upstream body cut into the given byte pieces and collects what the client gets. */
async function run(
  pieces: Uint8Array[],
  opts: {
    idleTimeoutMs?: number;
    failAfter?: boolean;
    /** After the pieces the upstream goes silent, still connected. */
    hangAfter?: boolean;
    /** A pause before each piece after the first (separate packets). */
    gapMs?: number;
    maxBytes?: number;
    deadlineInMs?: number;
    outputCap?: number;
    /** The events' reader throws once it has handed over this many (a fault of the gateway's own). */
    throwAfterEvents?: number;
    /** Stopping the upstream throws. */
    abortThrows?: boolean;
    /** The relay compresses what it writes (the client gets it decoded here, and `parts` as sent). */
    compress?: Compressor;
    /** The client asked for `stream_options.include_usage`. */
    includeUsage?: boolean;
    /** The generation could not be priced: the relay is finished with no usage. */
    unbilled?: boolean;
  } = {},
) {
  let settled: RelayOutcome | undefined;
  const source = upstreamEventsFrom(pieces, opts);
  let handed = 0;
  const { throwAfterEvents } = opts;
  const events =
    throwAfterEvents === undefined
      ? source
      : {
          next: (timeoutMs?: number) => {
            if (handed++ >= throwAfterEvents) throw new TypeError('a bug in the reader');
            return source.next(timeoutMs);
          },
          cancel: () => source.cancel(),
        };
  let aborted = 0;
  const out = relayFinishedAtFixedUsage(
    relayOptions(events, {
      ...(opts.compress ? { compress: opts.compress } : {}),
      ...(opts.idleTimeoutMs !== undefined ? { idleTimeoutMs: opts.idleTimeoutMs } : {}),
      ...(opts.deadlineInMs !== undefined ? { deadline: Date.now() + opts.deadlineInMs } : {}),
      ...(opts.outputCap !== undefined ? { outputCap: opts.outputCap } : {}),
      ...(opts.includeUsage ? { includeUsage: true } : {}),
      abortUpstream: () => {
        aborted += 1;
        if (opts.abortThrows) throw new Error('abort failed');
      },
    }),
    (outcome) => {
      settled = outcome;
    },
    !opts.unbilled,
  );
  // Counted from here: the relay's first write comes after this turn of the event loop.
  let writes = 0;
  const counted = out as unknown as { push: (chunk: unknown) => boolean };
  const push = counted.push.bind(out);
  counted.push = (chunk) => {
    if (chunk !== null) writes += 1; // null is the end
    return push(chunk);
  };
  const parts: Buffer[] = [];
  for await (const part of out) parts.push(Buffer.from(part));
  const text = opts.compress ? gunzipSync(Buffer.concat(parts)).toString() : Buffer.concat(parts).toString();
  const sent = text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
  return { text, events: sent, settled, writes, aborted, parts };
}

const enc = new TextEncoder();
const chunk = (content: string, extra: Record<string, unknown> = {}) =>
  `data: ${JSON.stringify({ id: 'up-1', object: 'chat.completion.chunk', created: 1, model: 'sim', choices: [{ index: 0, delta: { content }, finish_reason: null }], ...extra })}\n\n`;
const usageChunk = `data: ${stringifyJson({ id: 'up-1', object: 'chat.completion.chunk', created: 1, model: 'sim', choices: [], usage: { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 } })}\n\n`;

/** Splits bytes at the given offsets. */
function splitAt(bytes: Uint8Array, offsets: number[]): Uint8Array[] {
  const out: Uint8Array[] = [];
  let start = 0;
  for (const offset of [...offsets, bytes.length]) {
    out.push(bytes.slice(start, offset));
    start = offset;
  }
  return out.filter((p) => p.length > 0);
}

describe('relay', () => {
  it('sends what one upstream packet carries as one write, the opening keep-alive with it', async () => {
    const packet = enc.encode(
      `${chunk('a') + chunk('b') + chunk('c') + chunk('d') + usageChunk}data: [DONE]\n\n`,
    );
    // The settlement answers at once here, so the usage chunk and [DONE] join the same write.
    const { events, writes } = await run([packet]);
    expect(events).toHaveLength(6); // four chunks, the usage chunk, [DONE]
    expect(writes).toBe(1);
  });

  it('sends events of separate packets as separate writes (nothing waits for the next packet)', async () => {
    const { writes } = await run(
      [enc.encode(chunk('a')), enc.encode(chunk('b')), enc.encode('data: [DONE]\n\n')],
      { gapMs: 5 },
    );
    // keep-alive with the first chunk; the second chunk; the usage chunk and [DONE].
    expect(writes).toBe(3);
  });

  it('rewrites id and model, drops the upstream usage chunk and ends with one chunk with usage and [DONE]', async () => {
    const { events, settled, text } = await run([
      enc.encode(`${chunk('Hel') + chunk('lo') + usageChunk}data: [DONE]\n\n`),
    ]);
    expect(text.startsWith(': keep-alive\n\n')).toBe(true);
    expect(events.at(-1)).toBe('[DONE]');
    const parsed = events.slice(0, -1).map((e) => JSON.parse(e));
    expect(
      parsed.every((c) => c.id === 'gen-1767225600-AAAAAAAAAAAAAAAAAAAA' && c.model === 'svc-fast'),
    ).toBe(true);
    expect(parsed.filter((c) => c.usage)).toHaveLength(1);
    // No finish chunk from this upstream: the relay's own carries the usage, a choice in it.
    expect(parsed.at(-1).choices).toEqual([{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }]);
    expect(parsed.at(-1).usage.cost).toBe(0.5);
    expect(settled?.usage).toMatchObject({
      usage: { promptTokens: 4, completionTokens: 2, cachedTokens: 0 },
    });
    expect(settled?.deliveredText).toBe('Hello');
    expect(settled?.failure).toBeUndefined();
  });

  it('parses input split inside a multi-byte character, inside "data:", and between \\r and \\n', async () => {
    const raw = `${chunk('héllo wörld ✓').replace(/\n/g, '\r\n')}${chunk('🙂')}${usageChunk}data: [DONE]\r\n\r\n`;
    const bytes = enc.encode(raw);
    const emoji = raw.indexOf('🙂');
    const emojiByte = enc.encode(raw.slice(0, emoji)).length + 2; // inside the 4-byte emoji
    const crlf = enc.encode(raw.slice(0, raw.indexOf('\r\n'))).length + 1; // between \r and \n
    const insideData = 3; // "dat" | "a: ..."
    const accent = enc.encode(raw.slice(0, raw.indexOf('é'))).length + 1; // inside "é"
    const { settled, events } = await run(splitAt(bytes, [insideData, accent, crlf, emojiByte]));
    expect(settled?.deliveredText).toBe('héllo wörld ✓🙂');
    expect(events.at(-1)).toBe('[DONE]');
  });

  it('parses several events arriving in one read, and one event arriving a byte at a time', async () => {
    const bytes = enc.encode(`${chunk('a') + chunk('b') + usageChunk}data: [DONE]\n\n`);
    const byteByByte = Array.from(bytes, (b) => Uint8Array.of(b));
    const { settled } = await run(byteByByte);
    expect(settled?.deliveredText).toBe('ab');
    const report = settled?.usage;
    expect(report && 'usage' in report ? report.usage.completionTokens : undefined).toBe(2);
  });

  it('keeps usage that arrives on a chunk that still has choices, or after finish_reason', async () => {
    const withChoices = chunk('x', { usage: { prompt_tokens: 9, completion_tokens: 1, total_tokens: 10 } });
    const { settled, events } = await run([enc.encode(`${withChoices}data: [DONE]\n\n`)]);
    const report = settled?.usage;
    expect(report && 'usage' in report ? report.usage.promptTokens : undefined).toBe(9);
    const forwarded = JSON.parse(events[0] ?? '{}');
    expect(forwarded.usage).toBeUndefined();
  });

  it('passes tool-call deltas through intact', async () => {
    const delta = (d: unknown, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: 'u', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: d, finish_reason: finish }] })}\n\n`;
    const raw =
      delta({
        role: 'assistant',
        content: null,
        tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get', arguments: '' } }],
      }) +
      delta({ tool_calls: [{ index: 0, function: { arguments: '{"ci' } }] }) +
      delta({ tool_calls: [{ index: 0, function: { arguments: 'ty":"P"}' } }] }) +
      delta({}, 'tool_calls') +
      'data: [DONE]\n\n';
    const { events } = await run([enc.encode(raw)]);
    const parsed = events.slice(0, 4).map((e) => JSON.parse(e));
    expect(parsed[0].choices[0].delta.tool_calls[0]).toEqual({
      index: 0,
      id: 'call_1',
      type: 'function',
      function: { name: 'get', arguments: '' },
    });
    const args = parsed.map((c) => c.choices[0].delta.tool_calls?.[0]?.function?.arguments ?? '').join('');
    expect(JSON.parse(args)).toEqual({ city: 'P' });
    expect(parsed[3].choices[0].finish_reason).toBe('tool_calls');
  });

  it('ends a dropped connection with one error event in the chunk shape, after settling what was streamed', async () => {
    const { events, settled } = await run([enc.encode(chunk('partial'))], { failAfter: true });
    expect(settled?.failure).toBeTruthy();
    expect(settled?.deliveredText).toBe('partial');
    const last = JSON.parse(events.at(-2) ?? '{}');
    expect(last.object).toBe('chat.completion.chunk');
    expect(last.choices[0].finish_reason).toBe('error');
    expect(last.error.message).toBeTruthy();
    expect(events.at(-2)).toBe(JSON.stringify(last));
  });

  it('ends every stream with [DONE], after an error event too', async () => {
    for (const [pieces, opts] of [
      [[enc.encode(chunk('partial'))], { failAfter: true }],
      [[enc.encode(`${chunk('ok')}data: {not json\n\n`)], {}],
      [[enc.encode(`${chunk('ok')}data: {"error":{"message":"overloaded"}}\n\n`)], {}],
    ] as const) {
      const { events } = await run([...pieces], opts);
      expect(JSON.parse(events.at(-2) ?? '{}').choices[0].finish_reason).toBe('error');
      expect(events.at(-1)).toBe('[DONE]');
    }
  });

  it('sends only the documented chunk fields: private ones are dropped at every level', async () => {
    const data = {
      id: 'up-1',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'sim',
      provider: 'SecretCloud',
      x_upstream_internal: { node: 'gpu-17' },
      system_fingerprint: 'fp_1',
      choices: [
        {
          index: 0,
          delta: { content: 'hi', reasoning: 'think', provider_trace: 'x' },
          finish_reason: null,
          native_finish_reason: 'eos',
        },
      ],
    };
    const { events, settled } = await run([enc.encode(`data: ${JSON.stringify(data)}\n\ndata: [DONE]\n\n`)]);
    const sent = JSON.parse(events[0] ?? '{}');
    expect(Object.keys(sent).sort()).toEqual([
      'choices',
      'created',
      'id',
      'model',
      'object',
      'system_fingerprint',
    ]);
    expect(sent.choices[0]).toEqual({
      index: 0,
      delta: { content: 'hi', reasoning: 'think' },
      logprobs: null,
      finish_reason: null,
    });
    expect(settled?.deliveredText).toBe('thinkhi');
  });

  it('cuts off an upstream that sends more than the bound', async () => {
    const pieces = Array.from({ length: 50 }, () => enc.encode(chunk('x'.repeat(100))));
    const { settled, events } = await run(pieces, { maxBytes: 2_000 });
    expect(events.at(-1)).toBe('[DONE]');
    expect(JSON.parse(events.at(-2) ?? '{}').choices[0].finish_reason).toBe('error');
    expect(settled?.failure).toMatch(/more than/);
  });

  it('treats a malformed chunk as a failure after the first byte', async () => {
    const { settled, events } = await run([enc.encode(`${chunk('ok')}data: {not json\n\n`)]);
    expect(settled?.failure).toMatch(/malformed/);
    expect(JSON.parse(events.at(-2) ?? '{}').choices[0].finish_reason).toBe('error');
  });
});

describe('relay limits', () => {
  it('ends at its deadline with a length finish, even when the deadline comes before the idle limit', async () => {
    const { settled, text } = await run([enc.encode(chunk('partial '))], {
      hangAfter: true,
      idleTimeoutMs: 10_000,
      deadlineInMs: 150,
    });
    expect(settled?.cut).toBe('deadline');
    expect(settled?.failure).toBeUndefined();
    expect(text).toContain('"finish_reason":"length"');
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it('cuts a stream that clearly exceeds its output cap, without relaying the excess', async () => {
    const pieces = Array.from({ length: 200 }, () => enc.encode(chunk('word ')));
    const { settled, events } = await run(pieces, { hangAfter: true, outputCap: 4 });
    expect(settled?.cut).toBe('output_cap');
    // (4 + 16) allowed tokens x 4 chunks each: at most 80 content chunks reach the client.
    const content = events.filter((e) => e.includes('"content"'));
    expect(content.length).toBeLessThanOrEqual(80);
    expect(events.at(-1)).toBe('[DONE]');
  });

  it('neither delivers nor bills an event that would take the stream past its output bound', async () => {
    // One event of 50 KB against a cap of 8 tokens: (8 + 16) x 6 = 144 bytes allowed.
    const { settled, events } = await run(
      [enc.encode(chunk('small ')), enc.encode(chunk('y'.repeat(50_000)))],
      {
        hangAfter: true,
        outputCap: 8,
      },
    );
    expect(settled?.cut).toBe('output_cap');
    expect(settled?.deliveredText).toBe('small ');
    expect(events.some((e) => e.includes('yyyy'))).toBe(false);
  });

  it('settles what it delivered and ends with [DONE] when its own reader throws, its keep-alive stopped', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    const before = timers();
    const { events, settled, aborted } = await run(
      [enc.encode(chunk('one ')), enc.encode(chunk('two')), enc.encode('data: [DONE]\n\n')],
      { throwAfterEvents: 1 },
    );
    // The delivered chunk is billed, as a failure; the upstream is stopped.
    expect(settled?.deliveredText).toBe('one ');
    expect(settled?.failure).toMatch(/gateway failed/);
    expect(aborted).toBe(1);
    const last = JSON.parse(events.at(-2) ?? '{}');
    expect(last.error).toMatchObject({ type: 'server_error', code: 'internal_error' });
    expect(last.usage.cost).toBe(0.5);
    expect(events.at(-1)).toBe('[DONE]');
    expect(events.some((e) => e.includes('"two"'))).toBe(false);
    expect(timers()).toBe(before);
  });

  it('still settles and ends with [DONE] when stopping the upstream throws', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    const before = timers();
    const { events, settled, aborted } = await run([enc.encode(chunk('partial'))], {
      failAfter: true,
      abortThrows: true,
    });
    expect(aborted).toBe(1);
    expect(settled?.deliveredText).toBe('partial');
    expect(settled?.failure).toMatch(/connection was lost/);
    expect(JSON.parse(events.at(-2) ?? '{}').error).toMatchObject({ code: 'upstream_error' });
    expect(events.at(-1)).toBe('[DONE]');
    expect(timers()).toBe(before);
  });

  describe('compressing what it writes', () => {
    const packets = () => [
      enc.encode(chunk('Hel')),
      enc.encode(chunk('lo')),
      enc.encode(`${usageChunk}data: [DONE]\n\n`),
    ];
    /** The relay of `packets` through `compress`, read by nobody yet; `outcome.settled` once settled. */
    const relayTo = (compress: Compressor) => {
      const outcome: { settled?: RelayOutcome } = {};
      const out = relayFinishedAtFixedUsage(
        relayOptions(upstreamEventsFrom(packets(), { gapMs: 5 }), { compress }),
        (settled) => {
          outcome.settled = settled;
        },
      );
      return { out, outcome };
    };

    it('sends the same stream, each write decodable as it arrives (nothing held back)', async () => {
      const plain = await run(packets(), { gapMs: 5 });
      const compressed = await run(packets(), { gapMs: 5, compress: new SyncGzip() });
      expect(compressed.text).toBe(plain.text);
      expect(compressed.settled?.deliveredText).toBe('Hello');
      // Every prefix of the writes decodes to whole events: each write was flushed whole.
      for (let i = 1; i < compressed.parts.length; i++) {
        const prefix = gunzipSync(Buffer.concat(compressed.parts.slice(0, i)), {
          finishFlush: constants.Z_SYNC_FLUSH,
        }).toString();
        expect(prefix.endsWith('\n\n')).toBe(true);
      }
      expect(compressed.parts.length).toBeGreaterThanOrEqual(3);
    });

    it('ends the client stream if the compressor fails, and still settles everything relayed', async () => {
      let calls = 0;
      const failing: Compressor = {
        write: (text) => {
          if (++calls === 2) throw new Error('zlib: out of memory');
          return Buffer.from(text);
        },
        end: () => Buffer.alloc(0),
        close: () => {},
      };
      const { out, outcome } = relayTo(failing);
      const failed = new Promise((resolve) => out.once('error', resolve));
      out.resume();
      expect(await failed).toMatchObject({ message: 'zlib: out of memory' });
      await vi.waitFor(() => expect(outcome.settled?.deliveredText).toBe('Hello'));
    });

    it('frees the compressor when the client stream is destroyed', async () => {
      let closed = 0;
      const compress: Compressor = {
        write: (text) => Buffer.from(text),
        end: () => Buffer.alloc(0),
        close: () => {
          closed += 1;
        },
      };
      const { out } = relayTo(compress);
      out.destroy();
      await new Promise((resolve) => out.once('close', resolve));
      expect(closed).toBe(1);
    });
  });
});

describe('where the usage goes', () => {
  const finishChunk = (reason: string, content = '') =>
    chunk(content).replace('"finish_reason":null', `"finish_reason":"${reason}"`);
  /** The chunks the client got, [DONE] left out (it must be last). */
  const chunksOf = (events: string[]) => {
    expect(events.at(-1)).toBe('[DONE]');
    return events.slice(0, -1).map((e) => JSON.parse(e));
  };
  const stop = { index: 0, delta: {}, logprobs: null, finish_reason: 'stop' };

  it('puts it on the finish chunk, held back until billed, when the client did not ask for it', async () => {
    const { events } = await run([
      enc.encode(`${chunk('Hel') + chunk('lo') + finishChunk('stop', '!') + usageChunk}data: [DONE]\n\n`),
    ]);
    const chunks = chunksOf(events);
    expect(chunks.every((c) => c.choices.length === 1)).toBe(true);
    expect(chunks.slice(0, -1).every((c) => !('usage' in c))).toBe(true);
    // What the finish chunk carried went out at once, on a chunk of its own; only the finish waited.
    expect(chunks.map((c) => c.choices[0].delta.content ?? '').join('')).toBe('Hello!');
    expect(chunks.map((c) => c.choices[0].finish_reason)).toEqual([null, null, null, 'stop']);
    expect(chunks[3].choices[0]).toEqual(stop);
    expect(chunks[3].usage).toMatchObject({ prompt_tokens: 1, completion_tokens: 2, cost: 0.5 });
  });

  it('sends an earlier finish chunk as it came once a newer one arrives, the usage on the last', async () => {
    const { events } = await run([
      enc.encode(`${chunk('a') + finishChunk('stop') + finishChunk('stop')}data: [DONE]\n\n`),
    ]);
    const chunks = chunksOf(events);
    expect(chunks.map((c) => c.choices[0].finish_reason)).toEqual([null, 'stop', 'stop']);
    expect(chunks.map((c) => 'usage' in c)).toEqual([false, false, true]);
  });

  it('adds a finish chunk of its own when the upstream sent none: stop, or tool_calls after a tool call', async () => {
    const plain = chunksOf((await run([enc.encode(`${chunk('a')}data: [DONE]\n\n`)])).events);
    expect(plain.at(-1).choices).toEqual([stop]);
    expect(plain.at(-1).usage.cost).toBe(0.5);
    const call = chunk('').replace(
      '"delta":{"content":""}',
      '"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}',
    );
    const tool = chunksOf((await run([enc.encode(`${call}data: [DONE]\n\n`)])).events);
    expect(tool.at(-1).choices[0].finish_reason).toBe('tool_calls');
    // A finish followed by a chunk without one: the upstream's last finish_reason is said again.
    const after = chunksOf(
      (await run([enc.encode(`${finishChunk('length') + chunk('')}data: [DONE]\n\n`)])).events,
    );
    expect(after.map((c) => c.choices[0].finish_reason)).toEqual(['length', null, 'length']);
    expect(after.map((c) => 'usage' in c)).toEqual([false, false, true]);
  });

  it('puts it on the length chunk of a cut, after the finish chunk it held back', async () => {
    const { events, settled } = await run([enc.encode(chunk('partial ') + finishChunk('stop'))], {
      hangAfter: true,
      idleTimeoutMs: 10_000,
      deadlineInMs: 150,
    });
    expect(settled?.cut).toBe('deadline');
    const chunks = chunksOf(events);
    expect(chunks.map((c) => c.choices[0].finish_reason)).toEqual([null, 'stop', 'length']);
    expect(chunks.map((c) => 'usage' in c)).toEqual([false, false, true]);
    expect(chunks.at(-1).usage.cost).toBe(0.5);
  });

  it('keeps the error chunk with the usage on a failure, what it held back sent before it', async () => {
    const { events } = await run([enc.encode(chunk('a') + finishChunk('stop'))], { failAfter: true });
    const chunks = chunksOf(events);
    expect(chunks.map((c) => c.choices[0].finish_reason)).toEqual([null, 'stop', 'error']);
    expect(chunks.at(-1).usage.cost).toBe(0.5);
  });

  it('sends what it held back as it came, then the billing error, when the generation is not priced', async () => {
    const { events } = await run([enc.encode(`${chunk('a') + finishChunk('stop')}data: [DONE]\n\n`)], {
      unbilled: true,
    });
    const chunks = chunksOf(events);
    expect(chunks.map((c) => c.choices[0].finish_reason)).toEqual([null, 'stop', 'error']);
    expect(chunks.some((c) => 'usage' in c)).toBe(false);
    expect(chunks.at(-1).error.code).toBe('billing_failed');
  });

  it("gives OpenAI's include_usage shape to a client that asked: usage null, then choices [] with the usage", async () => {
    for (const upstream of [
      `${chunk('Hel') + chunk('lo') + finishChunk('stop') + usageChunk}data: [DONE]\n\n`,
      `${chunk('Hel') + chunk('lo')}data: [DONE]\n\n`,
    ]) {
      const chunks = chunksOf((await run([enc.encode(upstream)], { includeUsage: true })).events);
      expect(chunks.slice(0, -1).every((c) => c.usage === null && c.choices.length === 1)).toBe(true);
      // A finish_reason before the usage, the upstream's or the relay's own.
      expect(chunks.at(-2).choices[0].finish_reason).toBe('stop');
      expect(chunks.at(-1).choices).toEqual([]);
      expect(chunks.at(-1).usage).toMatchObject({ completion_tokens: 2, cost: 0.5 });
    }
    const cut = await run([enc.encode(chunk('partial '))], {
      includeUsage: true,
      hangAfter: true,
      idleTimeoutMs: 10_000,
      deadlineInMs: 150,
    });
    const chunks = chunksOf(cut.events);
    expect(chunks.map((c) => c.choices[0]?.finish_reason)).toEqual([null, 'length', undefined]);
    expect(chunks.map((c) => c.usage?.cost ?? c.usage)).toEqual([null, null, 0.5]);
  });

  it('keeps sending keep-alives while a finish chunk is held back for the bill, its text sent', async () => {
    const relayed = relay(
      relayOptions(
        upstreamEventsFrom([enc.encode(`${chunk('a') + finishChunk('stop', 'b')}data: [DONE]\n\n`)]),
        {
          keepAliveMs: 20,
        },
      ),
    );
    let text = '';
    relayed.body.on('data', (part: Buffer) => {
      text += part.toString();
    });
    const ended = new Promise((resolve) => relayed.body.once('end', resolve));
    await relayed.delivered;
    // The bill takes its time: keep-alives go on, after the content, the finish chunk not yet sent.
    await vi.waitFor(() => expect(text.split('\n\n').slice(3)).toContain(': keep-alive'));
    expect(text).not.toContain('"finish_reason":"stop"');
    expect(text).toContain('"content":"b"');
    relayed.finish(FIXED_USAGE);
    await ended;
    const events = text.split('\n\n').filter((e) => e.startsWith('data: '));
    const last = JSON.parse((events.at(-2) ?? '').slice(6));
    expect(last.choices[0].finish_reason).toBe('stop');
    expect(last.usage.cost).toBe(0.5);
  });
});
