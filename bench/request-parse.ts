/**
 * `npx tsx bench/request-parse.ts`: CPU to parse and check a request body, through ChatRequestSchema
 * alone (as every request went until 2026-11-26) against parseChatRequest (which takes the common
 * shapes the short way, simpleChatRequest), on Node 22 when scripts/install-lambda-runtime.sh has
 * installed it. Two bodies: one user message, and an SDK stream with a system prompt, two turns and
 * settings. Each call has GAP_MS (5) idle before it (as an instance between invocations, its caches
 * cooling); the ways take turns, ROUNDS (4) rounds of 300 calls. Prints microseconds per call.
 */
import { chatRequestBySchema, parseChatRequest } from '../functions/core/schemas.js';
import { runOnNode22 } from './on-node22.js';
import { pacedCpuUs } from './paced-cpu.js';

runOnNode22();

const GAP_MS = Number(process.env.GAP_MS ?? 5);
const ROUNDS = Number(process.env.ROUNDS ?? 4);
const bodies = {
  'one message': JSON.stringify({
    model: 'svc-fast',
    messages: [{ role: 'user', content: 'Say hello.' }],
  }),
  'SDK stream, four messages': JSON.stringify({
    messages: [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'Hello there.' },
      { role: 'assistant', content: 'Hi! How can I help?', refusal: null },
      { role: 'user', content: 'Tell me a joke.' },
    ],
    model: 'svc-fast',
    max_completion_tokens: 256,
    stream: true,
    stream_options: { include_usage: true },
    temperature: 0.7,
  }),
};
const ways: Record<string, (body: string) => unknown> = {
  'schema alone': (body) => chatRequestBySchema(JSON.parse(body)),
  parseChatRequest: (body) => parseChatRequest(body),
};

console.log(`Node ${process.version}, ${GAP_MS} ms between calls, us of CPU per call`);
for (const [name, body] of Object.entries(bodies)) {
  const results: Record<string, number[]> = Object.fromEntries(Object.keys(ways).map((way) => [way, []]));
  for (let round = 0; round < ROUNDS; round++)
    for (const [way, parse] of Object.entries(ways))
      results[way]?.push((await pacedCpuUs(() => parse(body), GAP_MS, 300)).us);
  for (const [way, us] of Object.entries(results)) {
    const sorted = [...us].sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
    console.log(
      `${name} (${body.length} bytes), ${way}: median ${median.toFixed(1)}, lowest ${(sorted[0] ?? 0).toFixed(1)}`,
    );
  }
}
