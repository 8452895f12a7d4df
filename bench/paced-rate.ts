/**
 * The highest paced event rate the relay sustains at a memory size's CPU share: the completions
 * bundle under aws-lambda-ric on Node 22, one instance, its process held to 160 MB's share of a vCPU
 * (bench/cpu-limit.ts), relaying streams from an upstream in this process that sends one event per
 * packet at a fixed rate. Each event carries the time it was sent (`t=<ms>;` as its content), read
 * on this process's clock when the client receives it: its delay through the service, and its added
 * inter-event delay (the gap to the event before it as received, minus that gap as sent). The same
 * stream read directly from the upstream gives the baseline; the added p99 is the difference of the
 * p99s. Rates rise until the added p99 passes the limit.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { basename } from 'node:path';
import { createAccount, createKey } from '../lib/admin/operations.js';
import { bundleFunctions, ricLauncher } from '../lib/local/aws-lambda-ric.js';
import { startLocalStack } from '../lib/local/stack.js';
import { startBareProxies } from './bare-proxy.js';
import { available as cgroupAvailable, cpuShare, limitCpu } from './cpu-limit.js';

const STREAM_SECONDS = 3;
/** Events sent in a stream's first this many ms are its start (time to first token), not its pace. */
const START_MS = 250;
const RATES = [100, 200, 300, 400, 500, 700, 1000];
const ADDED_P99_LIMIT_MS = 10;

/** An upstream that streams `n` events at `rate` a second, each stamped with the time it is sent. */
async function pacedUpstream(): Promise<{ url: string; server: Server }> {
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (piece: Buffer) => {
      body += piece.toString();
    });
    request.on('end', () => {
      const spec = /rate=(\d+) n=(\d+)/.exec(body);
      const rate = Number(spec?.[1] ?? 100);
      const n = Number(spec?.[2] ?? 10);
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      const envelope = { id: 'chatcmpl-paced', object: 'chat.completion.chunk', created: 1, model: 'paced' };
      const started = performance.now();
      let i = 0;
      const next = () => {
        if (i === n) {
          response.write(
            `data: ${JSON.stringify({ ...envelope, choices: [], usage: { prompt_tokens: 12, completion_tokens: n, total_tokens: 12 + n } })}\n\n`,
          );
          response.end('data: [DONE]\n\n');
          return;
        }
        const delta = { content: `t=${performance.now().toFixed(3)};` };
        response.write(
          `data: ${JSON.stringify({ ...envelope, choices: [{ index: 0, delta, logprobs: null, finish_reason: i === n - 1 ? 'stop' : null }] })}\n\n`,
        );
        i += 1;
        // Each event at its own time from the start: a late timer does not delay the ones after it.
        setTimeout(next, Math.max(0, started + (i * 1000) / rate - performance.now()));
      };
      next();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

interface Timing {
  /** Each event's delay: receive time minus send time (ms). */
  delays: number[];
  /** Each event's gap to the one before it as received, minus that gap as sent (ms): its added inter-event delay. */
  addedGaps: number[];
}

/** The events of one paced stream, timed (those of its first START_MS, its start, left out). */
async function eventTimes(
  url: string,
  headers: Record<string, string>,
  rate: number,
  n: number,
): Promise<Timing> {
  const response = await fetch(url, {
    method: 'POST',
    // What the OpenAI SDKs send: the service compresses the stream for them.
    headers: { 'content-type': 'application/json', 'accept-encoding': 'gzip, deflate', ...headers },
    body: JSON.stringify({
      model: 'svc-fast',
      messages: [{ role: 'user', content: `rate=${rate} n=${n}` }],
      stream: true,
    }),
  });
  if (response.status !== 200 || !response.body)
    throw new Error(`the paced stream answered ${response.status}`);
  const times: { sent: number; received: number }[] = [];
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const piece of response.body) {
    const now = performance.now();
    buffered += decoder.decode(piece, { stream: true });
    let end = buffered.indexOf('\n\n');
    while (end >= 0) {
      const sent = /t=([\d.]+);/.exec(buffered.slice(0, end));
      if (sent) times.push({ sent: Number(sent[1]), received: now });
      buffered = buffered.slice(end + 2);
      end = buffered.indexOf('\n\n');
    }
  }
  const first = times[0]?.sent ?? 0;
  const steady = times.filter((t) => t.sent - first >= START_MS);
  return {
    delays: steady.map((t) => t.received - t.sent),
    addedGaps: steady
      .slice(1)
      .map((t, i) => t.received - (steady[i]?.received ?? 0) - (t.sent - (steady[i]?.sent ?? 0))),
  };
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? Number.NaN;
};

/** The completions instances this process started: its children running in that function's bundle. */
/** This process's completions instances (the emulator's children whose working directory is its bundle). */
export function completionsPids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const ppid = Number(readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.split(' ')[1]);
      if (ppid === process.pid && basename(readlinkSync(`/proc/${entry}/cwd`)) === 'completions')
        pids.push(Number(entry));
    } catch {
      // the process has gone
    }
  }
  return pids;
}

/** CPU ms of every thread of one process (/proc/<pid>/task/<tid>/schedstat). */
function processCpuMs(pid: number): number {
  let ns = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread has gone
    }
  }
  return ns / 1e6;
}

type Row = {
  rate: number;
  events: number;
  p50: number;
  p99: number;
  addedP99: number;
  throttledMs: number;
  /** CPU of the instance per event, the stream's start and its end (the settlement) included. */
  cpuUs: number;
};

export interface PacedRateResult {
  /** The highest rate tried whose added p99 inter-event delay stayed under the limit (0 if none). */
  sustained: number;
  rows: Row[];
}

/** Rates rising, each a stream through `url` with process `pid` held to the memory size's share. */
async function sustainedRate(
  url: string,
  headers: Record<string, string>,
  pid: number,
  upstreamUrl: string,
  memoryMb: number,
): Promise<PacedRateResult> {
  const result: PacedRateResult = { sustained: 0, rows: [] };
  const limit = limitCpu(pid);
  limit.set(memoryMb);
  try {
    for (const rate of RATES) {
      const n = rate * STREAM_SECONDS;
      const direct = await eventTimes(`${upstreamUrl}/chat/completions`, {}, rate, n);
      const before = limit.stat().throttledMs;
      const cpuBefore = processCpuMs(pid);
      const via = await eventTimes(url, headers, rate, n);
      const row: Row = {
        rate,
        events: via.delays.length,
        p50: percentile(via.delays, 50),
        p99: percentile(via.delays, 99),
        addedP99: percentile(via.addedGaps, 99) - percentile(direct.addedGaps, 99),
        throttledMs: limit.stat().throttledMs - before,
        cpuUs: ((processCpuMs(pid) - cpuBefore) * 1000) / n,
      };
      result.rows.push(row);
      if (row.addedP99 >= ADDED_P99_LIMIT_MS) break;
      result.sustained = rate;
    }
  } finally {
    limit.release();
  }
  return result;
}

export async function pacedRate(
  say: (line?: string) => void,
  dynamoEndpoint: string,
  memoryMb = 160,
): Promise<{ service: PacedRateResult; identity: PacedRateResult; floor: PacedRateResult } | undefined> {
  if (!cgroupAvailable()) {
    say('');
    say('(The paced rate at a memory size needs write access to /sys/fs/cgroup/cpu and taskset: skipped.)');
    return undefined;
  }
  const upstream = await pacedUpstream();
  const bundles = await bundleFunctions('.cache/paced-bundles');
  const stack = await startLocalStack({
    dynamoEndpoint,
    tablePrefix: 'paced-',
    upstreamBaseUrl: upstream.url,
    launcher: ricLauncher(bundles),
    // One instance, so that every stream meets the same CPU limit.
    functions: { completions: { maxInstances: 1, warmInstances: 1 } },
    env: { LOG_LEVEL: 'SILENT', POWERTOOLS_METRICS_DISABLED: 'true' },
  });
  const bare = await startBareProxies(upstream.url);
  let service: PacedRateResult;
  let identity: PacedRateResult;
  let floor: PacedRateResult;
  try {
    await createAccount({ store: stack.store }, 'paced', '100000');
    const { key } = await createKey({ store: stack.store }, 'paced', 'paced');
    const viaService = `${stack.baseUrl}/chat/completions`;
    const auth = { authorization: `Bearer ${key}` };
    // Warm, unlimited: the cold start, the JIT, the connections.
    for (let i = 0; i < 5; i++) {
      await eventTimes(viaService, auth, 500, 200);
      await eventTimes(bare.urls['bare-stream'], {}, 500, 200);
    }
    const [pid] = completionsPids();
    const [barePid] = bare.pids('bare-stream');
    if (pid === undefined || barePid === undefined) throw new Error('no instance found to limit');
    service = await sustainedRate(viaService, auth, pid, upstream.url, memoryMb);
    // The same function for a client that does not take gzip (the floor compresses nothing).
    identity = await sustainedRate(
      viaService,
      { ...auth, 'accept-encoding': 'identity' },
      pid,
      upstream.url,
      memoryMb,
    );
    floor = await sustainedRate(bare.urls['bare-stream'], {}, barePid, upstream.url, memoryMb);
  } finally {
    await bare.close();
    await stack.stop();
    upstream.server.close();
  }
  say('');
  say(
    `## Paced event rate at ${memoryMb} MB's CPU share (${(cpuShare(memoryMb) * 100).toFixed(1)}% of a vCPU)`,
  );
  say('');
  say(
    `One instance (aws-lambda-ric, Node 22) held to that share with a CFS quota: the completions function (its client taking gzip, then not), then the floor (the bare streaming proxy, which compresses nothing). Streams of ${STREAM_SECONDS} s, one event per packet; ` +
      `delay = an event's receive time minus its send time (the events of a stream's first ${START_MS} ms, its start, left out); ` +
      'added inter-event delay = the gap to the previous event as received minus that gap as sent; added p99 = its p99 through the function minus its p99 read directly.',
  );
  say('');
  say(
    '| function | events/s | events | delay p50 ms | delay p99 ms | added inter-event p99 ms | throttled ms | CPU us/event |',
  );
  say('|---|---|---|---|---|---|---|---|');
  for (const [name, result] of [
    ['completions, gzip', service],
    ['completions, identity', identity],
    ['floor', floor],
  ] as const)
    for (const r of result.rows)
      say(
        `| ${name} | ${r.rate} | ${r.events} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.addedP99.toFixed(2)} | ${r.throttledMs.toFixed(0)} | ${r.cpuUs.toFixed(0)} |`,
      );
  say('');
  say(
    `Highest rate sustained with an added p99 inter-event delay under ${ADDED_P99_LIMIT_MS} ms: completions ${service.sustained || 'none of those tried'} (${identity.sustained || 'none of those tried'} for a client without gzip), floor ${floor.sustained || 'none of those tried'} events/s.`,
  );
  return { service, identity, floor };
}
