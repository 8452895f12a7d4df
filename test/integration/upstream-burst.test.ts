import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usdToNano } from '../../functions/core/money.js';
import { SIMULATOR_PRICES } from '../../functions/core/tiers.js';
import { type FakeUpstream, startFakeUpstream } from '../support/fake-upstream.js';
import { readSse } from '../support/sse.js';
import { newAccount, startTarget, type Target } from '../support/target.js';
import { hostileUpstreamEnv, oneChargeItem, postCompletion } from '../support/upstream-replies.js';

/**
 * An upstream that writes its whole event stream in one burst and then drops the connection, with
 * the functions run as Lambda runs them: each instance in a thread of its own (the emulator's worker
 * launcher, the default), not in the test's thread. There the function's event loop and the
 * upstream's are not one, and what a reset costs is what TCP says it costs: a reset (RST, SO_LINGER
 * 0) discards whatever the upstream's own kernel has not yet sent, and on loopback that is all of a
 * burst past the function's receive window (about 120 KB with Linux's default 128 KiB receive
 * buffer), however fast the function reads. So a burst that fits in the window, or one ended by a
 * close (FIN), has every event relayed and billed; a larger one ended by a reset has every event
 * that reached the function relayed and billed, and then the error.
 */
let behave: (res: ServerResponse) => void;
let hostile: FakeUpstream;
let target: Target;
const START = 5_000_000_000n;

beforeAll(async () => {
  hostile = await startFakeUpstream((_body, res) => behave(res));
  const tiers = {
    'svc-fast': [{ baseUrl: hostile.url, model: 'liar', prices: SIMULATOR_PRICES['svc-fast'] }],
    'svc-pro': [{ baseUrl: hostile.url, model: 'liar', prices: SIMULATOR_PRICES['svc-pro'] }],
    'svc-heavy': [{ baseUrl: hostile.url, model: 'liar', prices: SIMULATOR_PRICES['svc-heavy'] }],
  };
  target = await startTarget({
    env: hostileUpstreamEnv(tiers),
  });
});
afterAll(async () => {
  await target?.stop();
  await hostile?.close();
});

const envelope = { id: 'up-1', object: 'chat.completion.chunk', created: 1, model: 'liar' };
const event = (content: string) =>
  `data: ${JSON.stringify({ ...envelope, choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
const piecesOf = (count: number) => Array.from({ length: count }, (_, i) => ` e${i}`);

/** Every event as its own chunk, all of them (and the head) in one write; then `close` the socket. */
function burst(pieces: string[], close: 'reset' | 'close') {
  behave = (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.socket?.cork();
    for (const piece of pieces) res.write(event(piece));
    res.socket?.uncork();
    res.write('', () => (close === 'reset' ? res.socket?.resetAndDestroy() : res.socket?.destroy()));
  };
}

/** The relayed pieces (each event's content, in order), after checking the stream ended on the error, billed as delivered. */
async function relayed() {
  const { accountId, key } = await newAccount(target);
  const response = await postCompletion(target, key, 'svc-fast', true);
  expect(response.status).toBe(200);
  const { data } = await readSse(response);
  expect(data.at(-1)).toBe('[DONE]');
  const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
  const last = chunks.at(-1);
  expect(last.choices[0].finish_reason).toBe('error');
  expect(chunks.filter((c) => c.error)).toHaveLength(1);
  const { charge } = await oneChargeItem(target, accountId, START);
  expect(charge.estimated).toBe(true);
  expect(-charge.deltaNano).toBe(usdToNano(String(last.usage.cost)));
  const pieces: string[] = chunks
    .map((c) => c.choices?.[0]?.delta?.content)
    .filter((content): content is string => typeof content === 'string' && content !== '');
  return { pieces, last };
}

describe('an upstream that bursts its stream and drops the connection, the function in a thread of its own', () => {
  it('2,000 events (321 KB), then a close: every event is relayed and billed', async () => {
    const sent = piecesOf(2_000);
    burst(sent, 'close');
    const { pieces, last } = await relayed();
    expect(pieces).toEqual(sent);
    expect(last.usage.completion_tokens).toBeGreaterThanOrEqual(2_000);
  });

  it('300 events (48 KB, inside the receive window), then RST: every event is relayed and billed', async () => {
    const sent = piecesOf(300);
    burst(sent, 'reset');
    const { pieces, last } = await relayed();
    expect(pieces).toEqual(sent);
    expect(last.usage.completion_tokens).toBeGreaterThanOrEqual(300);
  });

  it('2,000 events, then RST: every event that reached the function is relayed, in order, and billed', async () => {
    const sent = piecesOf(2_000);
    burst(sent, 'reset');
    const { pieces, last } = await relayed();
    // The reset discards the part of the burst still in the upstream's kernel (what did not fit in
    // the function's receive window): a prefix of whole events arrives, and all of it is relayed.
    expect(pieces.length).toBeGreaterThan(300);
    expect(pieces).toEqual(sent.slice(0, pieces.length));
    expect(last.usage.completion_tokens).toBeGreaterThanOrEqual(pieces.length);
  });
});
