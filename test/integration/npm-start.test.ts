import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { dynamoAnswers, freePort } from '../../lib/local/dynamodb-local.js';

/** `npm start` as a newcomer runs it: bin/local.ts in its own process. */
function start(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bin/local.ts'], {
    env: { ...process.env, DYNAMODB_ENDPOINT: '', UPSTREAM_BASE_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, output: () => ({ stdout, stderr }) };
}

async function waitFor(predicate: () => boolean, ms: number, what: string) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function stopChild(child: ChildProcess) {
  if (child.exitCode === null) child.kill('SIGKILL');
}

describe('npm start', () => {
  it('starts DynamoDB Local on its data directory, prints a working key once, and Ctrl-C stops everything', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'svc-start-'));
    const dynamoPort = await freePort();
    const env = { PORT: '0', SVC_DATA_DIR: dataDir, DYNAMODB_LOCAL_PORT: String(dynamoPort) };
    const first = start(env);
    try {
      await waitFor(() => first.output().stdout.includes('Ctrl-C'), 90_000, 'the service to start');
      const { stdout } = first.output();
      const baseUrl = /listening on (\S+)/.exec(stdout)?.[1];
      const key = /(svc_live_[0-9A-Za-z]{43})/.exec(stdout)?.[1];
      expect(baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/v1$/);
      expect(key).toBeDefined();
      expect(stdout).toContain('curl ');
      expect(stdout).toContain('new OpenAI({ baseURL: ');
      const response = await fetch(`${baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'Hello' }] }),
      });
      expect(response.status).toBe(200);
      expect(await dynamoAnswers(`http://127.0.0.1:${dynamoPort}`)).toBe(true);
      first.child.kill('SIGINT');
      expect(await first.exited).toBe(0);
      expect(await dynamoAnswers(`http://127.0.0.1:${dynamoPort}`)).toBe(false);
    } finally {
      stopChild(first.child);
    }

    // The data is kept between runs: the second start finds the account and prints no new key.
    const second = start(env);
    try {
      await waitFor(() => second.output().stdout.includes('Ctrl-C'), 90_000, 'the second start');
      expect(second.output().stdout).not.toMatch(/svc_live_[0-9A-Za-z]{43}/);
      expect(second.output().stdout).toContain('exists');
      second.child.kill('SIGINT');
      expect(await second.exited).toBe(0);
    } finally {
      stopChild(second.child);
    }
  }, 240_000);

  it('exits non-zero with one line on how to install Java when Java is missing', async () => {
    const run = start({
      PATH: '/nonexistent',
      PORT: '0',
      SVC_DATA_DIR: mkdtempSync(join(tmpdir(), 'svc-nojava-')),
      DYNAMODB_LOCAL_PORT: String(await freePort()),
    });
    const code = await run.exited;
    expect(code).not.toBe(0);
    const lines = run.output().stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('openjdk-17-jre-headless');
  }, 60_000);
});
