/**
 * `npx tsx bench/twins.ts`: what each hand-written twin on the request path saves against its
 * reference, in microseconds of CPU per call and per request, on Node 22 when
 * scripts/install-lambda-runtime.sh has installed it. A twin stays only where it saves at least 10% of
 * the request's CPU (the side by side's figure for the function, `BENCH_ONLY=cpu npm run bench`) and
 * a property test holds it equal to its reference.
 *
 * The twins and their references, on the inputs the side by side sends (its ~500-word prompt, the
 * simulator's replies to it):
 * - the request's check: simpleChatRequest, or the request schema (zod) alone;
 * - the JSON reply's check: textCompletion, or CompletionSchema (zod) alone;
 * - each stream chunk's check: textChunk, or ChunkSchema (zod) alone;
 * - each relayed chunk's line: chunkLine, or the whole chunk through JSON.stringify.
 * Each call has GAP_MS idle before it (5 for a request's, 13 for a chunk's, as an instance between
 * invocations or paced events, its caches cooling), and back to back (0); the two ways take turns,
 * ROUNDS rounds of CALLS calls. Prints medians over the rounds.
 */
import { chunkEnvelope, chunkLine, envelopeHead } from '../functions/completions/relay.js';
import { chatRequestBySchema, simpleChatRequest } from '../functions/core/schemas.js';
import {
  chunkBySchema,
  completionBySchema,
  textChunk,
  textCompletion,
} from '../functions/core/upstream-reply.js';
import { createSimulator } from '../functions/simulator/simulator.js';
import { runOnNode22 } from './on-node22.js';
import { pacedCpuUs } from './paced-cpu.js';

runOnNode22();

const ROUNDS = Number(process.env.ROUNDS ?? 5);
const CALLS = Number(process.env.CALLS ?? 200);
/** The side by side's prompt (bench/run.ts): about 500 tokens of plain words. */
const PROMPT = Array.from(
  { length: 490 },
  (_, i) => ['alpha', 'beta', 'gamma', 'delta', 'omega'][i % 5],
).join(' ');
const requestBody = (stream: boolean) =>
  JSON.stringify({
    model: 'svc-fast',
    messages: [{ role: 'user', content: `${PROMPT} [[sim:tokens=16]]` }],
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
  });
const simulator = createSimulator();
const reply = async (stream: boolean) => {
  const response = await simulator.handle({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: {},
    body: requestBody(stream),
  });
  return response.body.map((piece) => ('text' in piece ? piece.text : '')).join('');
};
const completionText = await reply(false);
const chunkTexts = (await reply(true))
  .split('\n\n')
  .filter((event) => event.startsWith('data: {'))
  .map((event) => event.slice('data: '.length));
const envelope = chunkEnvelope({
  generationId: 'gen-1767225600-AAAAAAAAAAAAAAAAAAAA',
  created: 1_767_225_600,
  tier: 'svc-fast',
});
const head = envelopeHead(envelope);
const parsedChunks = chunkTexts.map((text) => {
  const chunk = chunkBySchema(JSON.parse(text));
  if ('invalid' in chunk) throw new Error(chunk.invalid);
  return chunk;
});

interface Twin {
  name: string;
  /** Calls per request: [JSON request, 16-event stream]. */
  perRequest: [number, number];
  gapMs: number;
  twin: (i: number) => unknown;
  reference: (i: number) => unknown;
}
const json = (i: number) =>
  JSON.parse(i % 2 ? requestBody(true) : requestBody(false)) as Record<string, unknown>;
const chunkJson = (i: number) =>
  JSON.parse(chunkTexts[i % chunkTexts.length] as string) as Record<string, unknown>;
const twins: Twin[] = [
  {
    name: 'request check: simpleChatRequest vs the request schema',
    perRequest: [1, 1],
    gapMs: 5,
    twin: (i) => simpleChatRequest(json(i)),
    reference: (i) => chatRequestBySchema(json(i)),
  },
  {
    name: 'JSON reply check: textCompletion vs CompletionSchema',
    perRequest: [1, 0],
    gapMs: 5,
    twin: () => textCompletion(JSON.parse(completionText)),
    reference: () => completionBySchema(JSON.parse(completionText)),
  },
  {
    name: 'chunk check: textChunk vs ChunkSchema',
    perRequest: [0, chunkTexts.length],
    gapMs: 13,
    twin: (i) => textChunk(chunkJson(i)),
    reference: (i) => chunkBySchema(chunkJson(i)),
  },
  {
    name: 'chunk line: chunkLine vs JSON.stringify',
    perRequest: [0, chunkTexts.length],
    gapMs: 13,
    twin: (i) =>
      chunkLine(
        head,
        parsedChunks[i % parsedChunks.length] as (typeof parsedChunks)[number] & { choices: unknown[] },
      ),
    reference: (i) => {
      const { system_fingerprint, service_tier, choices } = parsedChunks[
        i % parsedChunks.length
      ] as (typeof parsedChunks)[number] & {
        choices: unknown[];
      };
      return `data: ${JSON.stringify({
        ...envelope,
        ...(system_fingerprint !== undefined ? { system_fingerprint } : {}),
        ...(service_tier !== undefined ? { service_tier } : {}),
        choices,
      })}\n\n`;
    },
  },
];

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;
console.log(
  `Node ${process.version}, ${ROUNDS} rounds of ${CALLS} calls, us of CPU per call (median over rounds); the inputs: ${chunkTexts.length} chunks a 16-event stream`,
);
console.log('');
console.log(
  '| twin | gap | twin us | reference us | saved us/call | saved us per JSON request | per 16-event stream |',
);
console.log('|---|---|---|---|---|---|---|');
for (const t of twins) {
  // The twin must give what its reference gives (the property tests hold this on generated inputs).
  if (JSON.stringify(t.twin(0)) !== JSON.stringify(t.reference(0)))
    throw new Error(`${t.name}: the two differ`);
  for (let i = 0; i < 2000; i++) {
    t.twin(i);
    t.reference(i);
  }
  for (const gap of [0, t.gapMs]) {
    const twinUs: number[] = [];
    const refUs: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      twinUs.push((await pacedCpuUs(t.twin, gap, gap ? CALLS : CALLS * 20)).us);
      refUs.push((await pacedCpuUs(t.reference, gap, gap ? CALLS : CALLS * 20)).us);
    }
    const saved = median(refUs.map((ref, r) => ref - (twinUs[r] ?? 0)));
    console.log(
      `| ${t.name} | ${gap} ms | ${median(twinUs).toFixed(1)} | ${median(refUs).toFixed(1)} | ${saved.toFixed(1)} | ${(saved * t.perRequest[0]).toFixed(0)} | ${(saved * t.perRequest[1]).toFixed(0)} |`,
    );
  }
}
