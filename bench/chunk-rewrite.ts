/**
 * `npx tsx bench/chunk-rewrite.ts`: CPU per relayed chunk. Times, in one process with
 * `process.cpuUsage`, (1) the boundary's parse of one upstream event into a typed chunk
 * (`parseChunkData`: JSON.parse and the schema that keeps the documented fields), (2) that plus the
 * rewrite the relay sends (our envelope, JSON.stringify), on the simulator's content chunk, and
 * (3) the whole relay (body reader, SSE parsing, parse, rewrite, writes to the client stream) per
 * chunk for a 300-chunk stream. Prints microseconds per chunk.
 */

import { chunkEnvelope, chunkLine, envelopeHead, relay } from '../functions/completions/relay.js';
import { parseChunkData } from '../functions/core/upstream-reply.js';
import { usageForClient } from '../functions/core/usage.js';
import { relayOptions } from '../test/support/relay-options.js';
import { upstreamEventsFrom } from '../test/support/upstream-events.js';

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

function measure(name: string, step: (data: string) => number): number {
  const rounds = 200;
  let sink = 0;
  const once = () => {
    for (let r = 0; r < rounds; r++) for (const data of chunks) sink += step(data);
  };
  once(); // warm the JIT
  const samples = Array.from({ length: 5 }, () => cpuUsPer(rounds * chunks.length, once)).sort(
    (a, b) => a - b,
  );
  const median = samples[2] ?? Number.NaN;
  console.log(
    `${name}: ${median.toFixed(3)} us/chunk (median of 5 x ${rounds * chunks.length} chunks)${sink < 0 ? '!' : ''}`,
  );
  return median;
}

async function relayPerChunk(count: number): Promise<number> {
  const encoder = new TextEncoder();
  // The simulator writes one event per socket read; feed it the same way.
  const pieces = [
    ...chunks.slice(0, count).map((c) => encoder.encode(`data: ${c}\n\n`)),
    encoder.encode('data: [DONE]\n\n'),
  ];
  const streams = 200;
  const runOne = async () => {
    const out = relay(
      relayOptions(upstreamEventsFrom(pieces), {
        generationId: envelope.id,
        tier: envelope.model,
        created: envelope.created,
        settle: async () =>
          usageForClient({ promptTokens: 500, completionTokens: count, cachedTokens: 0 }, '0.0001'),
      }),
    );
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

measure('parse (JSON.parse + schema)', (d) => (parseChunkData(d).kind === 'chunk' ? 1 : 0));
measure('parse + rewrite, the whole chunk through JSON.stringify (before)', (d) => {
  const event = parseChunkData(d);
  if (event.kind !== 'chunk') return 0;
  const { system_fingerprint, service_tier, choices } = event.chunk;
  return `data: ${JSON.stringify({
    ...envelope,
    object: 'chat.completion.chunk',
    ...(system_fingerprint !== undefined ? { system_fingerprint } : {}),
    ...(service_tier !== undefined ? { service_tier } : {}),
    choices,
  })}\n\n`.length;
});
const head = envelopeHead(
  chunkEnvelope({ generationId: envelope.id, created: envelope.created, tier: envelope.model }),
);
measure('parse + rewrite, chunkLine (the relay)', (d) => {
  const event = parseChunkData(d);
  if (event.kind !== 'chunk') return 0;
  return chunkLine(head, event.chunk).length;
});
const whole = await relayPerChunk(300);
console.log(
  `whole relay, 300-chunk stream fed one event per read: ${whole.toFixed(2)} us/chunk (CPU incl. body reader, SSE parsing, stream writes, GC)`,
);
