import { type ChildProcess, spawn } from 'node:child_process';

/**
 * A bench's helper process (the simulator, a checkout's `npm start`, a floor): `args` run by this Node
 * with tsx, in `cwd`, with `env` over this process's environment. Resolves once its standard output
 * matches `ready`, with the match; fails with its output if it exits first or is not ready in 2 minutes
 * (a checkout's `npm start` bundles its functions first).
 */
export function startService(
  args: string[],
  ready: RegExp,
  options: { cwd?: string; env?: Record<string, string> } = {},
): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
    ...(options.cwd ? { cwd: options.cwd } : {}),
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const what = `${options.cwd ? `${options.cwd}: ` : ''}${args.join(' ')}`;
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not start: ${out}`)), 120_000);
    child.stdout?.on('data', (data: Buffer) => {
      out += data.toString();
      const match = ready.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve({ child, match });
      }
    });
    child.stderr?.on('data', (data: Buffer) => {
      out += data.toString();
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited ${code}: ${out}`));
    });
  });
}

/** Stops a helper process (SIGTERM) and waits for it to exit. */
export function stopService(child: ChildProcess): Promise<void> {
  return new Promise((done) => {
    if (child.exitCode !== null || child.signalCode !== null) return done();
    child.once('exit', () => done());
    child.kill('SIGTERM');
  });
}
