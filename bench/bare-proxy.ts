import { join } from 'node:path';
import { build } from 'esbuild';
import { bundle, ricLauncher } from '../lib/local/aws-lambda-ric.js';
import { startEmulator } from '../lib/local/emulator.js';
import { instancePids, processesCpuMs } from './process-cpu.js';

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
    // LAMBDA_CPU_PROF_DIR, as for `npm start`: each instance writes a V8 CPU profile there when stopped.
    launcher: ricLauncher(
      bundles,
      'ignore',
      process.env.LAMBDA_CPU_PROF_DIR ? { cpuProfileDir: process.env.LAMBDA_CPU_PROF_DIR } : {},
    ),
  });
  const pids = (name: BareName) => instancePids(process.pid, name);
  return {
    urls: {
      'bare-json': `${emulator.url}/bare-json`,
      'bare-stream': `${emulator.url}/bare-stream`,
      'bare-fixed': `${emulator.url}/bare-fixed`,
      'bare-billed': `${emulator.url}/bare-billed`,
      'bare-billed-stream': `${emulator.url}/bare-billed-stream`,
    },
    pids,
    cpuMs: (name) => processesCpuMs(pids(name)),
    close: () => emulator.close(),
  };
}
