import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { complete, takeChatRequest } from '../../../functions/completions/complete.js';
import { loadCompletionsConfig } from '../../../functions/completions/config.js';
import { authorize } from '../../../functions/core/access.js';
import type { FunctionUrlEvent } from '../../../functions/shared/http.js';
import { loadCaller } from '../../../functions/shared/principal.js';
import { accountWith } from '../../support/fixtures.js';
import { MemoryStore } from '../../support/memory-store.js';
import {
  awkwardPieces,
  twoFinishJson,
  twoFinishStream,
  writeInPieces,
} from '../../support/two-finish-stream.js';

/**
 * An upstream that reports its own cost (`usage.cost`, as OpenRouter does) is billed 1.3x that cost,
 * whether the usage comes on a usage-only last chunk, on the last chunk that still has choices (some
 * providers behind OpenRouter send it so, also as the second of two finish chunks, between CRLF
 * separators and comments, cut at awkward bytes: test/support/two-finish-stream.ts), or in a JSON body.
 */
const COST = '0.000123456';
const BILLED_NANO = 160_493n; // 0.000123456 x 1.3 = 0.0001604928 USD, rounded up to the nano-USD

type Shape =
  | 'usage-only chunk'
  | 'chunk with choices'
  | 'chunk with choices, then a usage-only chunk without cost'
  | 'second of two finish chunks, CRLF and comments, cut at awkward bytes'
  | 'json'
  | 'json with the same usage as the two finish chunks';

let server: ReturnType<typeof createServer>;
let url: string;
let shape: Shape = 'json';
beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (shape === 'json with the same usage as the two finish chunks') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end(twoFinishJson('Hi there'));
      }
      if (shape === 'second of two finish chunks, CRLF and comments, cut at awkward bytes') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        return void writeInPieces(res, awkwardPieces(twoFinishStream('Hi there')));
      }
      const envelope = { id: 'u', created: 1, model: 'm' };
      // The cost as OpenRouter writes it: a bare JSON number with its exact digits.
      const counts = '"prompt_tokens":10,"completion_tokens":2,"total_tokens":12';
      const usage = `{${counts},"cost":${COST}}`;
      if (shape === 'json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        const message = { role: 'assistant', content: 'Hi there' };
        res.end(
          `${JSON.stringify({ ...envelope, object: 'chat.completion', choices: [{ index: 0, message, finish_reason: 'stop' }] }).slice(0, -1)},"usage":${usage}}`,
        );
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (choices: object[], withUsage: string | false = false) =>
        `data: ${JSON.stringify({ ...envelope, object: 'chat.completion.chunk', choices }).slice(0, -1)}${withUsage ? `,"usage":${withUsage}` : ''}}\n\n`;
      const end = { index: 0, delta: { content: ' there' }, finish_reason: 'stop' };
      const first = chunk([{ index: 0, delta: { role: 'assistant', content: 'Hi' }, finish_reason: null }]);
      const last =
        shape === 'chunk with choices'
          ? chunk([end], usage)
          : shape === 'usage-only chunk'
            ? chunk([end]) + chunk([], usage)
            : chunk([end], usage) + chunk([], `{${counts}}`);
      res.end(`${first}${last}data: [DONE]\n\n`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => server?.close());

async function billedFor(which: Shape) {
  shape = which;
  const store = new MemoryStore();
  const { accountId, key } = await accountWith(store, '100', 'acct-1');
  // A price table the reported cost is plausible against ($0.00008 for these tokens; a cost far above
  // the table is not believed, usage-bounds.ts).
  const target = [{ baseUrl: url, model: 'm', prices: { input: '5', cachedInput: '0.5', output: '15' } }];
  const config = loadCompletionsConfig({
    TIERS_CONFIG: JSON.stringify({ 'svc-fast': target, 'svc-pro': target, 'svc-heavy': target }),
    MAX_CONCURRENCY: '100',
  });
  const body = {
    model: 'svc-fast',
    messages: [{ role: 'user', content: 'hello' }],
    stream: !which.startsWith('json'),
  };
  const event = {
    headers: { authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
    isBase64Encoded: false,
  } as unknown as FunctionUrlEvent;
  const caller = authorize(await loadCaller(store, event.headers.authorization), {
    requireCredit: true,
    topUpUrl: config.topUpUrl,
  });
  const settling: Promise<void>[] = [];
  const result = await complete(
    takeChatRequest(event),
    { caller, requestId: 'r', remainingMs: 300_000, afterReply: (work) => settling.push(work) },
    { store, config, credential: async () => undefined },
  );
  let text = '';
  if (typeof result.body === 'string') text = result.body;
  else for await (const part of result.body as Readable) text += part.toString();
  await Promise.all(settling);
  const [charge] = (await store.listLedger(accountId)).filter((entry) => entry.type === 'charge');
  return { charge, text };
}

describe("an upstream's reported cost", () => {
  it.each<Shape>([
    'json',
    'usage-only chunk',
    'chunk with choices',
    'chunk with choices, then a usage-only chunk without cost',
    'second of two finish chunks, CRLF and comments, cut at awkward bytes',
    'json with the same usage as the two finish chunks',
  ])('is billed at 1.3x when it comes in a %s', async (which) => {
    const { charge, text } = await billedFor(which);
    expect(charge?.deltaNano).toBe(-BILLED_NANO);
    expect(text).toContain('0.000160493');
  });
});
