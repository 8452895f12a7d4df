import { spawnSync } from 'node:child_process';
import { NODE22, runtimeInstalled } from '../lib/local/aws-lambda-ric.js';

/**
 * Runs the calling bench script again on Node 22 (the functions' runtime) when
 * scripts/install-lambda-runtime.sh has installed it and this is another Node, and exits with its
 * status; on Node 22, or without it installed, returns and the script goes on here.
 */
export function runOnNode22(): void {
  if (process.version.startsWith('v22') || !runtimeInstalled()) return;
  const run = spawnSync(NODE22, ['--import', 'tsx', ...process.argv.slice(1)], { stdio: 'inherit' });
  process.exit(run.status ?? 1);
}
