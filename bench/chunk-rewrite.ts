/**
 * `npx tsx bench/chunk-rewrite.ts`: CPU per relayed chunk (issue 15). Times, in one process with
 * `process.cpuUsage`, (1) the relay's current per-chunk step (parse, spread, stringify: the same
 * code as `rewriteParsed`), (2) the splice path of `functions/completions/chunk-rewrite.ts`, on
 * the simulator's content chunk, and (3) the whole relay (SSE parsing, rewrite, writes to the
 * client stream) per chunk for a 300-chunk stream. Prints microseconds per chunk.
 */

import { relay } from '../functions/completions/relay.js';
import { chunkRewriter, rewriteParsed } from './chunk-splice.js';

const envelope = { id: 'gen-1767225600-AAAAAAAAAAAAAAAAAAAA', created: 1_767_225_600, model: 'svc-fast' };
const chunk = (word: string) =>
  JSON.stringify({
    id: 'chatcmpl-0123456789abcdef',
    object: 'chat.completion.chunk',
    created: 1_767_225_600,
    model: 'sim-fast',
    system_fingerprint: 'fp_simulator',
    choices: [{ index: 0, delta: { content: word }, logprobs: null, finish_reason: null }],
  });
const words = Array.from({ length: 1000 }, (_, i) => ` word${i % 97}`);
const chunks = words.map(chunk);

function cpuUsPer(count: number, run: () => void): number {
  const before = process.cpuUsage();
  run();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / count;
}

function measure(name: string, rewrite: (data: string) => unknown): number {
  const rounds = 200;
  let sink = 0;
  const once = () => {
    for (let r = 0; r < rounds; r++)
      for (const data of chunks) sink += (rewrite(data) as { kind: string }).kind.length;
  };
  once(); // warm the JIT
  const samples = Array.from({ length: 5 }, () => cpuUsPer(rounds * chunks.length, once)).sort(
    (a, b) => a - b,
  );
  const median = samples[2] ?? NaN;
  console.log(
    `${name}: ${median.toFixed(3)} us/chunk (median of 5 x ${rounds * chunks.length} chunks)${sink < 0 ? '!' : ''}`,
  );
  return median;
}

async function relayPerChunk(count: number): Promise<number> {
  const body = `${chunks
    .slice(0, count)
    .map((c) => `data: ${c}\n\n`)
    .join('')}data: [DONE]\n\n`;
  const bytes = new TextEncoder().encode(body);
  const streams = 200;
  const runOne = async () => {
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        // The simulator writes one event per socket read; feed it the same way.
        let offset = 0;
        for (const c of chunks.slice(0, count)) {
          const piece = new TextEncoder().encode(`data: ${c}\n\n`);
          controller.enqueue(bytes.subarray(offset, offset + piece.length));
          offset += piece.length;
        }
        controller.enqueue(bytes.subarray(offset));
        controller.close();
      },
    });
    const out = relay({
      body: stream,
      generationId: envelope.id,
      tier: envelope.model,
      created: envelope.created,
      keepAliveMs: 10_000,
      idleTimeoutMs: 5_000,
      maxBytes: 10_000_000,
      abortUpstream: () => {},
      settle: async () => ({ prompt_tokens: 500, completion_tokens: count, total_tokens: 500 + count }),
    });
    for await (const _ of out) {
      // drain
    }
  };
  for (let i = 0; i < 20; i++) await runOne();
  const before = process.cpuUsage();
  for (let i = 0; i < streams; i++) await runOne();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / (streams * count);
}

const current = measure('current path (parse + spread + stringify)', (d) => rewriteParsed(d, envelope));
const rewriter = chunkRewriter(envelope);
const lean = measure('splice path (chunk-rewrite.ts)', (d) => rewriter.rewrite(d));
console.log(`saving: ${(current - lean).toFixed(3)} us/chunk (${((1 - lean / current) * 100).toFixed(0)}%)`);
const whole = await relayPerChunk(300);
console.log(
  `whole relay today, 300-chunk stream fed one event per read: ${whole.toFixed(2)} us/chunk (CPU incl. SSE parsing, stream writes, GC)`,
);
