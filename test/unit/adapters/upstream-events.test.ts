import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { UpstreamEvents } from '../../../functions/adapters/upstream-events.js';
import { TWO_FINISH_COST, twoFinishStream } from '../../support/two-finish-stream.js';
import { upstreamBodyOver, upstreamEventsFrom } from '../../support/upstream-events.js';

// A parser fault of the reader's own, on demand: the real parse for every other event.
vi.mock('../../../functions/core/upstream-reply.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../../functions/core/upstream-reply.js')>();
  return {
    ...original,
    parseChunkData: (data: string) => {
      if (data.includes('BOOM')) throw new Error('a parser bug');
      return original.parseChunkData(data);
    },
  };
});

const chunk = (content: string) =>
  `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;

/** UpstreamEvents over a stream standing in for the connection, written to by the test. */
function connection(maxBytes = 10_000_000) {
  const incoming = new PassThrough();
  const body = upstreamBodyOver(incoming, maxBytes);
  return { incoming, body, events: new UpstreamEvents(body, 1024 * 1024) };
}

/** Until the connection's callbacks for what was written have run. */
const delivered = () => new Promise((resolve) => setImmediate(resolve));

const contentOf = (event: unknown) =>
  (event as { chunk?: { choices: { delta: { content?: string } }[] } }).chunk?.choices[0]?.delta.content;

afterEach(() => {
  vi.restoreAllMocks();
});

describe('UpstreamEvents', () => {
  it('gives the events of each packet in order, an event split across packets once it is whole', async () => {
    const { incoming, events } = connection();
    const reader = events.next(5_000);
    incoming.write(chunk('one'));
    expect(contentOf(await reader)).toBe('one');
    // Two events in one packet, then a third split across two.
    incoming.write(chunk('two') + chunk('three'));
    const four = chunk('four');
    incoming.write(four.slice(0, 20));
    await delivered();
    incoming.end(four.slice(20));
    const seen: unknown[] = [];
    for (let event = await events.next(5_000); ; event = await events.next(5_000)) {
      if (event === 'timeout' || event.kind === 'end') break;
      seen.push(contentOf(event));
    }
    expect(seen).toEqual(['two', 'three', 'four']);
  });

  it('decodes as SSE does: a byte order mark at the start dropped, even split; invalid bytes as U+FFFD', async () => {
    const { incoming, events } = connection();
    const first = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(chunk('one'))]);
    // The mark split across two pieces, and a character split across two more.
    incoming.write(first.subarray(0, 2));
    await delivered();
    incoming.write(first.subarray(2));
    const accented = Buffer.from(chunk('caf\u00e9'));
    const inside = accented.indexOf(0xc3) + 1;
    incoming.write(accented.subarray(0, inside));
    await delivered();
    incoming.write(accented.subarray(inside));
    // Bytes that are not UTF-8 inside the JSON string; a later mark is text, not a mark.
    const bad = Buffer.from(chunk('a__b'));
    bad.set([0xff, 0xfe], bad.indexOf('__'));
    incoming.write(bad);
    incoming.end(chunk('\ufeffz'));
    const seen: unknown[] = [];
    for (let event = await events.next(5_000); ; event = await events.next(5_000)) {
      if (event === 'timeout' || event.kind === 'end') break;
      seen.push(contentOf(event));
    }
    expect(seen).toEqual(['one', 'caf\u00e9', 'a\ufffd\ufffdb', '\ufeffz']);
  });

  it('gives every event that arrived before a connection fault, then the fault', async () => {
    const { incoming, events } = connection();
    incoming.write(chunk('a') + chunk('b'));
    await delivered();
    incoming.destroy(new Error('socket hang up'));
    await delivered();
    expect(contentOf(await events.next(5_000))).toBe('a');
    expect(contentOf(await events.next(5_000))).toBe('b');
    expect(await events.next(5_000)).toMatchObject({ kind: 'lost' });
  });

  it('gives the events before a body past its byte bound, then the fault', async () => {
    const { incoming, events } = connection(chunk('a').length + 10);
    incoming.write(chunk('a'));
    incoming.write(chunk('b'));
    await delivered();
    expect(contentOf(await events.next(5_000))).toBe('a');
    const fault = await events.next(5_000);
    expect(fault).toMatchObject({ kind: 'lost' });
    expect((fault as { error: Error }).error.name).toBe('BodyTooLargeError');
  });

  it("answers 'timeout' when no event completes in time, however many pieces arrive, and reads on after it", async () => {
    const { incoming, events } = connection();
    const line = chunk('late');
    const waiting = events.next(150);
    // Pieces that complete no event do not restart the wait.
    for (let i = 0; i < 5; i++) {
      incoming.write(line.slice(i, i + 1));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(await waiting).toBe('timeout');
    for (const none of [0, -5, Number.NaN]) expect(await events.next(none)).toBe('timeout');
    incoming.write(line.slice(5));
    await delivered();
    // Not a positive wait: whatever has been parsed, else 'timeout'.
    expect(contentOf(await events.next(0))).toBe('late');
    incoming.end();
    expect(await events.next(5_000)).toEqual({ kind: 'end' });
  });

  it('reads a usage with its cost on the second of two finish chunks, CRLF-separated with comments, however the bytes are cut', async () => {
    const bytes = Buffer.from(twoFinishStream('Hello there'));
    /** Each event as the relay sees it: its kind, finish reason and usage's cost. */
    const read = async (pieces: Buffer[]) => {
      const events = upstreamEventsFrom(pieces);
      const seen: unknown[] = [];
      for (let event = await events.next(5_000); ; event = await events.next(5_000)) {
        if (event === 'timeout' || event.kind === 'end' || event.kind === 'lost') break;
        if (event.kind !== 'chunk') seen.push(event.kind);
        else {
          const usage = event.usage && 'usage' in event.usage ? event.usage.usage : undefined;
          seen.push([
            event.chunk.choices[0]?.finish_reason,
            usage && [usage.promptTokens, usage.completionTokens, usage.reportedCostUsd],
          ]);
        }
      }
      return seen;
    };
    const expected = [
      [null, undefined],
      [null, undefined],
      ['stop', undefined],
      ['stop', [21, 17, TWO_FINISH_COST]],
      'done',
    ];
    // Cut in two at every byte, and one byte a piece.
    for (let cut = 1; cut < bytes.length; cut++)
      expect(await read([bytes.subarray(0, cut), bytes.subarray(cut)]), `cut at ${cut}`).toEqual(expected);
    expect(await read([...bytes].map((byte) => Buffer.from([byte])))).toEqual(expected);
  });

  it('discards an event cut off by the end of the body', async () => {
    const { incoming, events } = connection();
    incoming.end(chunk('whole') + chunk('cut').slice(0, -2));
    expect(contentOf(await events.next(5_000))).toBe('whole');
    expect(await events.next(5_000)).toEqual({ kind: 'end' });
  });

  it('peeks at the first event (or a comment) without taking it', async () => {
    const { incoming, events } = connection();
    const peeked = events.peek(Date.now() + 5_000);
    incoming.write(chunk('first'));
    expect(contentOf(await peeked)).toBe('first');
    expect(contentOf(await events.next(5_000))).toBe('first');

    const other = connection();
    const comment = other.events.peek(Date.now() + 5_000);
    other.incoming.write(': OPENROUTER PROCESSING\n\n');
    expect(await comment).toBe('comment');
    expect(await other.events.peek(Date.now() - 1)).toBe('comment');
  });

  it('ends a waiting reader when it is cancelled, and drops the connection', async () => {
    const { incoming, events } = connection();
    const waiting = events.next(60_000);
    events.cancel();
    expect(await waiting).toEqual({ kind: 'end' });
    expect(incoming.destroyed).toBe(true);
  });

  it('throws its own parse fault to its reader after the events before it, with no uncaught exception', async () => {
    const uncaught = vi.fn();
    process.on('uncaughtException', uncaught);
    try {
      const { incoming, events } = connection();
      incoming.write(chunk('before'));
      incoming.write(chunk('BOOM'));
      incoming.write(chunk('after'));
      await delivered();
      expect(contentOf(await events.next(5_000))).toBe('before');
      await expect(events.next(5_000)).rejects.toThrow('a parser bug');
      expect(uncaught).not.toHaveBeenCalled();
    } finally {
      process.off('uncaughtException', uncaught);
    }
  });

  it('keeps one timer for a paced stream, not one per event, and none once it has ended', async () => {
    const timers = vi.spyOn(globalThis, 'setTimeout');
    const { incoming, events } = connection();
    let received = 0;
    const reading = (async () => {
      for (let event = await events.next(60_000); ; event = await events.next(60_000)) {
        if (event === 'timeout' || event.kind !== 'chunk') return event;
        received += 1;
      }
    })();
    for (let i = 0; i < 40; i++) {
      incoming.write(chunk(`t${i}`));
      await new Promise((resolve) => setImmediate(resolve));
    }
    incoming.end();
    expect(await reading).toEqual({ kind: 'end' });
    expect(received).toBe(40);
    // Each wait's deadline is a little later than the last: the first timer serves them all.
    const long = timers.mock.calls.filter(([, ms]) => typeof ms === 'number' && ms > 50_000);
    expect(long).toHaveLength(1);
  });
});
