/**
 * The floor for the CPU bench: what a Lambda function costs when it does the least its job needs,
 * under the same runtime client (aws-lambda-ric on Node 22, each instance its own process) and the
 * same emulator as the service's functions. Three handlers (bench/bare-proxy/): a buffered one that
 * answers a fixed JSON body (the account function's floor), a response-streaming one that relays one
 * kept-alive upstream call's JSON reply whole, and one that relays its SSE body piece by piece (the
 * completions function's floors); and the two relays with billing's two DynamoDB exchanges through
 * the service's store adapter (bench/bare-proxy/billed-json.ts, billed-stream.ts), when given a
 * DynamoDB to bill in.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { basename, join } from 'node:path';
import { build } from 'esbuild';
import { bundle, ricLauncher } from '../lib/local/aws-lambda-ric.js';
import { startEmulator } from '../lib/local/emulator.js';

const HANDLERS = {
  'bare-json': 'json',
  'bare-stream': 'stream',
  'bare-fixed': 'fixed',
  'bare-billed': 'billed-json',
  'bare-billed-stream': 'billed-stream',
} as const;
type BareName = keyof typeof HANDLERS;

export interface BareProxies {
  /**
   * POST: the JSON floor; POST with `stream: true`: the streaming floor; GET: the buffered floor;
   * `bare-billed`, `bare-billed-stream`: the JSON and streaming floors with billing's exchanges (a
   * funded key's Bearer header).
   */
  urls: Record<BareName, string>;
  /** CPU ms of all instances of one of them (/proc/<pid>/task/*\/schedstat). */
  cpuMs(name: BareName): number;
  /** Their instance processes. */
  pids(name: BareName): number[];
  close(): Promise<void>;
}

export async function startBareProxies(
  upstreamBaseUrl: string,
  /** The DynamoDB endpoint and table names (as the functions' environment names them) the billed floors bill in. */
  billing: Record<string, string> = {},
): Promise<BareProxies> {
  const root = '.cache/bare-proxy-bundles';
  const bundles: Record<string, string> = {};
  for (const [name, file] of Object.entries(HANDLERS)) {
    const dir = join(process.cwd(), root, name);
    // The billed floor runs the service's own adapter: bundled as the stack bundles the functions.
    if (name === 'bare-billed' || name === 'bare-billed-stream') {
      bundles[name] = await bundle(`bench/bare-proxy/${file}.ts`, dir);
      continue;
    }
    await build({
      entryPoints: [`bench/bare-proxy/${file}.ts`],
      outfile: join(dir, 'index.mjs'),
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node22',
      minify: true,
      logLevel: 'warning',
    });
    bundles[name] = dir;
  }
  const fn = (name: BareName) => ({ name, module: '', timeoutMs: 60_000, memoryMb: 160 });
  const emulator = await startEmulator({
    routes: (Object.keys(HANDLERS) as BareName[]).map((name) => ({
      match: (path: string) => path === `/${name}`,
      fn: fn(name),
    })),
    env: { UPSTREAM_BASE_URL: upstreamBaseUrl, PATH: process.env.PATH ?? '', ...billing },
    launcher: ricLauncher(bundles),
  });
  const pids = (name: BareName) => {
    const found: number[] = [];
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const ppid = Number(readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.split(' ')[1]);
        if (ppid === process.pid && basename(readlinkSync(`/proc/${entry}/cwd`)) === name)
          found.push(Number(entry));
      } catch {
        // the process has gone
      }
    }
    return found;
  };
  return {
    urls: {
      'bare-json': `${emulator.url}/bare-json`,
      'bare-stream': `${emulator.url}/bare-stream`,
      'bare-fixed': `${emulator.url}/bare-fixed`,
      'bare-billed': `${emulator.url}/bare-billed`,
      'bare-billed-stream': `${emulator.url}/bare-billed-stream`,
    },
    pids,
    cpuMs: (name) => {
      let ns = 0;
      for (const pid of pids(name)) {
        try {
          for (const tid of readdirSync(`/proc/${pid}/task`))
            ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
        } catch {
          // the process or thread has gone
        }
      }
      return ns / 1e6;
    },
    close: () => emulator.close(),
  };
}
