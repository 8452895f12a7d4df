import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../lib/local/dynamodb-local.js';

/**
 * `npm run admin` while `npm start` runs, as a newcomer does it: two processes on one data directory,
 * the admin's environment without DYNAMODB_LOCAL_PORT. The admin runs with no Java on its PATH, so it
 * cannot start a DynamoDB Local of its own: it succeeds only through the running stack's engine.
 */
const run = promisify(execFile);

async function waitFor(predicate: () => boolean, ms: number, what: string) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('the operator CLI beside a running npm start', () => {
  it("uses the running stack's DynamoDB Local, refuses in one line when that engine does not answer, never starts a second", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'svc-beside-'));
    const stack = spawn(process.execPath, ['--import', 'tsx', 'bin/local.ts'], {
      env: {
        ...process.env,
        PORT: '0',
        SVC_DATA_DIR: dataDir,
        DYNAMODB_LOCAL_PORT: String(await freePort()),
        DYNAMODB_ENDPOINT: '',
        UPSTREAM_BASE_URL: '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    stack.stdout?.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    const exited = new Promise<number | null>((resolve) => stack.once('exit', (code) => resolve(code)));
    const adminEnv: NodeJS.ProcessEnv = {
      ...process.env,
      PATH: dirname(process.execPath), // node, and no java
      SVC_DATA_DIR: dataDir,
      DYNAMODB_ENDPOINT: '',
      KEYS_TABLE: '',
      ACCOUNTS_TABLE: '',
      LEDGER_TABLE: '',
      HOLDS_TABLE: '',
    };
    delete adminEnv.DYNAMODB_LOCAL_PORT;
    const admin = async (...args: string[]) => {
      try {
        const result = await run(process.execPath, ['--import', 'tsx', 'bin/admin.ts', ...args], {
          env: adminEnv,
        });
        return { code: 0, ...result };
      } catch (error) {
        return error as { code: number; stdout: string; stderr: string };
      }
    };
    try {
      await waitFor(() => stdout.includes('Ctrl-C'), 90_000, 'npm start');
      const engine = JSON.parse(readFileSync(join(dataDir, 'dynamodb', 'engine.json'), 'utf8')) as {
        endpoint: string;
        enginePid: number;
      };
      expect(stdout).toContain(engine.endpoint);

      const shown = await admin('account', 'show', 'dev', '--json');
      expect(shown.code, shown.stderr).toBe(0);
      expect(JSON.parse(shown.stdout)).toMatchObject({ accountId: 'dev', creditBalance: '5' });
      const added = await admin('credits', 'add', 'dev', '1', '--ref', 'beside-1', '--json');
      expect(JSON.parse(added.stdout)).toMatchObject({ applied: true, creditBalance: '6' });

      // The engine stops answering (paused) while it still holds the files: one line, exit 1.
      process.kill(engine.enginePid, 'SIGSTOP');
      try {
        const refused = await admin('account', 'show', 'dev');
        expect(refused.code).toBe(1);
        const lines = refused.stderr.trim().split('\n');
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatch(new RegExp(`pid ${engine.enginePid}\\b.*does not answer`));
      } finally {
        process.kill(engine.enginePid, 'SIGCONT');
      }

      stack.kill('SIGINT');
      expect(await exited).toBe(0);
      // Nothing serves the directory any more: the file is gone with the engine.
      expect(existsSync(join(dataDir, 'dynamodb', 'engine.json'))).toBe(false);
    } finally {
      if (stack.exitCode === null) stack.kill('SIGKILL');
    }
  }, 240_000);
});
