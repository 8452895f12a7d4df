/**
 * `npx tsx bench/portkey-harness.ts`: why the side by side read Portkey's CPU per request at about
 * twice what a minimal harness reads. One factor at a time against a baseline that is the minimal
 * harness (Portkey warm, one client on one kept-alive connection, an upstream that answers in one
 * write, a short prompt), in interleaved rounds; CPU = run time of all threads of the Portkey process
 * (/proc/<pid>/task/*\/schedstat) / requests, medians over the rounds.
 *
 * Factors: the Node that runs Portkey (the bench started it with its own Node, 20, where the
 * functions run on 22); the upstream (the simulator's reply, written piece by piece and chunked, or
 * the same bytes in one write with a Content-Length); the prompt (the bench's ~500 words, or one
 * line); the client (one kept-alive connection, or a new connection a request); idle before the
 * requests (the bench's interleaved rounds leave each system idle for a minute).
 * PORTKEY_DIR: where `@portkey-ai/gateway` 1.15.2 is installed (default .cache/portkey, as bench/run.ts;
 * bench/portkey.ts installs it there if it is not).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { Agent, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NODE22 } from '../lib/local/aws-lambda-ric.js';
import { freePort } from '../lib/local/dynamodb-local.js';
import { startPortkey } from './portkey.js';
import { processCpuMs } from './process-cpu.js';

const ROUNDS = Number(process.env.HARNESS_ROUNDS ?? 5);
const PER = Number(process.env.HARNESS_REQUESTS ?? 100);
const IDLE_MS = Number(process.env.HARNESS_IDLE_MS ?? 20_000);

const LONG_PROMPT = Array.from(
  { length: 490 },
  (_, i) => ['alpha', 'beta', 'gamma', 'delta', 'omega'][i % 5],
).join(' ');
const SHORT_PROMPT = 'Say hello.';
const body = (prompt: string, stream: boolean) =>
  JSON.stringify({
    model: 'svc-fast',
    messages: [{ role: 'user', content: `${prompt} [[sim:tokens=16]]` }],
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
  });

function post(url: string, payload: string, headers: Record<string, string>, agent: Agent | false) {
  return new Promise<{ status: number; text: string; headers: Record<string, unknown> }>(
    (resolve, reject) => {
      const req = request(
        url,
        {
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', ...headers },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (part: string) => {
            text += part;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text, headers: res.headers }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(payload);
    },
  );
}

/** The simulator in its own process, as bench/run.ts starts it. */
async function startSimulator(): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/simulator.ts'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /SIMULATOR (\S+)/.exec(out);
      if (m?.[1]) resolve(m[1]);
    });
    child.once('exit', () => reject(new Error(`simulator exited: ${out}`)));
  });
  return { child, url };
}

/**
 * The minimal upstream: the simulator's own reply bytes for each request body, recorded once, sent in
 * one write with a Content-Length.
 */
async function startOneWrite(simUrl: string, bodies: string[]) {
  const recorded = new Map<string, { type: string; text: string }>();
  for (const b of bodies) {
    const r = await post(`${simUrl}/chat/completions`, b, { authorization: 'Bearer sim' }, false);
    recorded.set(b, { type: String(r.headers['content-type']), text: r.text });
  }
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (p: Buffer) => parts.push(p));
    req.on('end', () => {
      const got = recorded.get(Buffer.concat(parts).toString('utf8'));
      if (!got) {
        res.writeHead(500).end();
        return;
      }
      res.writeHead(200, { 'content-type': got.type, 'content-length': Buffer.byteLength(got.text) });
      res.end(got.text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` };
}

interface Variant {
  name: string;
  portkey: 'node20' | 'node22';
  upstream: 'simulator' | 'one-write';
  prompt: 'short' | 'long';
  client: 'keep-alive' | 'new-connection';
  idle: boolean;
}

const median = (values: number[]) => {
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? Number.NaN) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};

async function main() {
  const sim = await startSimulator();
  const bodies = [false, true].flatMap((stream) => [body(SHORT_PROMPT, stream), body(LONG_PROMPT, stream)]);
  const oneWrite = await startOneWrite(sim.url, bodies);
  const portkeys = {
    node20: await startPortkey(await freePort(), process.execPath),
    node22: await startPortkey(await freePort(), NODE22),
  };
  const agents = {
    node20: new Agent({ keepAlive: true, maxSockets: 1 }),
    node22: new Agent({ keepAlive: true, maxSockets: 1 }),
  };
  const base: Variant = {
    name: 'minimal harness',
    portkey: 'node22',
    upstream: 'one-write',
    prompt: 'short',
    client: 'keep-alive',
    idle: false,
  };
  const only = process.env.HARNESS_ONLY?.split(',');
  const all: Variant[] = [
    base,
    { ...base, name: 'Portkey on Node 20', portkey: 'node20' },
    { ...base, name: "the simulator's framing", upstream: 'simulator' },
    { ...base, name: "the bench's 500-word prompt", prompt: 'long' },
    { ...base, name: 'a new connection a request', client: 'new-connection' },
    { ...base, name: `idle ${IDLE_MS / 1000} s before`, idle: true },
    {
      name: 'the bench as it was',
      portkey: 'node20',
      upstream: 'simulator',
      prompt: 'long',
      client: 'keep-alive',
      idle: false,
    },
    {
      name: 'the bench with Portkey on Node 22',
      portkey: 'node22',
      upstream: 'simulator',
      prompt: 'long',
      client: 'keep-alive',
      idle: false,
    },
  ];
  const variants = all.filter((v) => !only || only.some((o) => v.name.includes(o)));
  const measure = async (v: Variant, stream: boolean, count: number) => {
    const pk = portkeys[v.portkey];
    const upstream = v.upstream === 'simulator' ? sim.url : oneWrite.url;
    const payload = body(v.prompt === 'long' ? LONG_PROMPT : SHORT_PROMPT, stream);
    const headers = {
      'x-portkey-provider': 'openai',
      'x-portkey-custom-host': upstream,
      authorization: 'Bearer sim',
    };
    const pid = pk.child.pid ?? 0;
    const before = processCpuMs(pid);
    for (let i = 0; i < count; i++) {
      const r = await post(
        `${pk.url}/v1/chat/completions`,
        payload,
        headers,
        v.client === 'keep-alive' ? agents[v.portkey] : false,
      );
      if (r.status !== 200) throw new Error(`${v.name}: ${r.status} ${r.text.slice(0, 200)}`);
    }
    return (processCpuMs(pid) - before) / count;
  };
  // Warm every variant first, unmeasured.
  for (const v of variants) for (const stream of [false, true]) await measure(v, stream, 100);
  const results = new Map<string, { json: number[]; stream: number[] }>();
  for (let r = 0; r < ROUNDS; r++) {
    for (const v of variants) {
      if (v.idle) await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
      const json = await measure(v, false, PER);
      if (v.idle) await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
      const stream = await measure(v, true, PER);
      const got = results.get(v.name) ?? { json: [], stream: [] };
      got.json.push(json);
      got.stream.push(stream);
      results.set(v.name, got);
      console.error(`round ${r + 1} ${v.name}: json ${json.toFixed(3)} stream ${stream.toFixed(3)}`);
    }
  }
  console.log(
    `\nPortkey 1.15.2, CPU ms per request, median of ${ROUNDS} interleaved rounds of ${PER} (range)\n`,
  );
  console.log(
    '| variant | JSON request | 16-event stream | JSON, of the first row | stream, of the first row |',
  );
  console.log('|---|---|---|---|---|');
  const cell = (xs: number[]) =>
    `${median(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)})`;
  const first = results.get(variants[0]?.name ?? '');
  // Each round's figure against the first variant's in the same round: the machine drifts.
  const ratio = (xs: number[], of: number[] | undefined) =>
    cell(xs.map((x, r) => x / (of?.[r] ?? Number.NaN)));
  for (const v of variants) {
    const got = results.get(v.name);
    if (got)
      console.log(
        `| ${v.name} | ${cell(got.json)} | ${cell(got.stream)} | ${ratio(got.json, first?.json)} | ${ratio(got.stream, first?.stream)} |`,
      );
  }
  for (const pk of Object.values(portkeys)) pk.child.kill('SIGTERM');
  sim.child.kill('SIGTERM');
  oneWrite.server.close();
  for (const a of Object.values(agents)) a.destroy();
}

await main();
