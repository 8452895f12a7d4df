import { main } from '../../lib/admin/cli.js';

/**
 * Runs the operator CLI's entry point in this process (the same `main` bin/admin.ts runs; a process
 * per call costs a second or more of TypeScript loading, which a busy 2-core machine multiplies);
 * returns exit code, stdout and stderr.
 */
export async function runAdmin(args: string[], env: NodeJS.ProcessEnv) {
  let stdout = '';
  let stderr = '';
  const code = await main(args, env, {
    out: (text) => {
      stdout += `${text}\n`;
    },
    err: (text) => {
      stderr += `${text}\n`;
    },
  });
  return { code, stdout, stderr };
}
