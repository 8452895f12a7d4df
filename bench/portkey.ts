import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { NODE22 } from '../lib/local/aws-lambda-ric.js';

/**
 * The Portkey gateway for the side by side: 1.15.2, installed into PORTKEY_DIR (default
 * .cache/portkey) for the bench only, never a dependency of the service; its streams need
 * @hono/node-server 1.13.8, pinned with npm overrides.
 */
export const PORTKEY_VERSION = '1.15.2';
export const portkeyDir = () => process.env.PORTKEY_DIR ?? '.cache/portkey';
export const portkeyPackage = () => ({
  private: true,
  dependencies: { '@portkey-ai/gateway': PORTKEY_VERSION },
  overrides: { '@hono/node-server': '1.13.8' },
});

/**
 * How Portkey is started: on Node 22, the Node the service's functions run on, as the bench's other
 * systems run. Started with the bench's own Node (20 here), it read about 1.4-1.9x the CPU per
 * request it reads on Node 22 (bench/portkey-harness.ts, bench/README.md): the side by side compared
 * Node 22 functions with a Node 20 Portkey. `node` picks another (bench/portkey-harness.ts compares them).
 */
export function portkeyCommand(
  port: number,
  node = NODE22,
): { node: string; args: string[]; env: Record<string, string> } {
  return {
    node,
    args: [
      `${portkeyDir()}/node_modules/@portkey-ai/gateway/build/start-server.js`,
      `--port=${port}`,
      '--headless',
    ],
    env: { NODE_ENV: 'production' },
  };
}

/**
 * Installs Portkey once (npm, the pinned versions), starts it on `port` (on Node 22, or `node`) and
 * waits for its answer.
 */
export async function startPortkey(
  port: number,
  node = NODE22,
): Promise<{ child: ChildProcess; url: string }> {
  const dir = portkeyDir();
  const command = portkeyCommand(port, node);
  if (!existsSync(command.args[0] as string)) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(`${dir}/package.json`, JSON.stringify(portkeyPackage()));
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefix', dir], { stdio: 'ignore' });
  }
  const child = spawn(command.node, command.args, {
    env: { ...process.env, ...command.env },
    stdio: 'ignore',
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if ((await status(`${url}/`)) === 200) return { child, url };
    if (child.exitCode !== null) throw new Error(`Portkey exited ${child.exitCode}`);
    if (i > 300) throw new Error('Portkey did not start');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function status(url: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request(url, { agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve(0));
    req.end();
  });
}
