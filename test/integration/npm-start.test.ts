import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { dynamoAnswers, freePort } from '../../lib/local/dynamodb-local.js';
import { Browser, formAction } from '../support/browser.js';

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

/** The first line of the process's standard output that contains `text`, once it is printed. */
async function lineOf(run: ReturnType<typeof start>, text: string): Promise<string> {
  const find = () =>
    run
      .output()
      .stdout.split('\n')
      .find((line) => line.includes(text));
  await waitFor(() => find() !== undefined, 15_000, `a line with ${text}`);
  return find() ?? '';
}

function stopChild(child: ChildProcess) {
  if (child.exitCode === null) child.kill('SIGKILL');
}

describe('npm start', () => {
  it('starts DynamoDB Local on its data directory, prints a working key once, and Ctrl-C stops everything', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'svc-start-'));
    const dynamoPort = await freePort();
    // The functions log as deployed (the tests' own LOG_LEVEL is SILENT).
    const env = {
      PORT: '0',
      SVC_DATA_DIR: dataDir,
      DYNAMODB_LOCAL_PORT: String(dynamoPort),
      LOG_LEVEL: 'INFO',
      LOG_FORMAT: '',
    };
    const first = start(env);
    let key: string | undefined;
    try {
      await waitFor(() => first.output().stdout.includes('Ctrl-C'), 90_000, 'the service to start');
      const { stdout } = first.output();
      const baseUrl = /listening on (\S+)/.exec(stdout)?.[1];
      key = /(svc_live_[0-9A-Za-z]{43})/.exec(stdout)?.[1];
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
      // The console: one short line for the request, with its tier, tokens, billed cost and id.
      const generationId = response.headers.get('x-generation-id');
      const { usage } = (await response.json()) as { usage: Record<string, number> };
      const line = await lineOf(first, `ms ${generationId}`);
      const shown =
        /^POST \/api\/v1\/chat\/completions 200 svc-fast (\d+)\+(\d+) tokens \$([\d.]+) \d+ ms (\S+)$/.exec(
          line,
        );
      expect(shown?.slice(1).map(Number).slice(0, 3)).toEqual([
        usage.prompt_tokens,
        usage.completion_tokens,
        usage.cost,
      ]);
      expect(shown?.[4]).toBe(generationId);
      const models = await fetch(`${baseUrl}/models`, { headers: { authorization: `Bearer ${key}` } });
      expect(models.status).toBe(200);
      expect(await lineOf(first, 'GET /api/v1/models')).toMatch(/^GET \/api\/v1\/models 200 \d+ ms$/);
      // Not the functions' JSON lines: the usage line (about 1,000 characters) is the log's.
      const printed = first.output().stdout.slice(first.output().stdout.indexOf('Ctrl-C'));
      expect(printed).not.toContain('generation usage');
      for (const each of printed.split('\n')) expect(each.length).toBeLessThanOrEqual(200);
      // The banner's dashboard user owns the dev account: a key made on the dashboard spends its $5.
      const dashboard = /dashboard: (\S+) +\(sign in as (\S+), password "([^"]+)"/.exec(stdout);
      expect(dashboard).not.toBeNull();
      const [, dashboardUrl, email, password] = dashboard as RegExpExecArray;
      expect(stdout).toContain(`Dashboard: ${email} signs in to account "dev".`);
      const browser = new Browser();
      const signInPage = await browser.open(`${dashboardUrl}sign-in`);
      const home = await browser.submit(signInPage, formAction(signInPage.body, /\/interaction\//), {
        email: email as string,
        password: password as string,
      });
      expect(home.body).toMatch(/\$4\.99\d*/);
      const keysPage = await browser.open(`${dashboardUrl}settings/api/keys`, {
        form: { name: 'from the dashboard' },
        origin: new URL(dashboardUrl as string).origin,
      });
      const dashboardKey = /svc_live_[0-9A-Za-z]{43}/.exec(keysPage.body)?.[0];
      expect(dashboardKey).toBeDefined();
      const spent = await fetch(`${baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${dashboardKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'Hello' }] }),
      });
      expect(spent.status).toBe(200);
      expect(await dynamoAnswers(`http://127.0.0.1:${dynamoPort}`)).toBe(true);
      first.child.kill('SIGINT');
      expect(await first.exited).toBe(0);
      expect(await dynamoAnswers(`http://127.0.0.1:${dynamoPort}`)).toBe(false);
    } finally {
      stopChild(first.child);
    }

    // The data is kept between runs: the second start finds the account and prints no new key. With
    // LOG_FORMAT=json the console shows the functions' JSON lines, the usage line whole.
    const second = start({ ...env, LOG_FORMAT: 'json' });
    try {
      await waitFor(() => second.output().stdout.includes('Ctrl-C'), 90_000, 'the second start');
      expect(second.output().stdout).not.toMatch(/svc_live_[0-9A-Za-z]{43}/);
      expect(second.output().stdout).toContain('exists');
      const baseUrl = /listening on (\S+)/.exec(second.output().stdout)?.[1];
      const response = await fetch(`${baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'Hello' }] }),
      });
      expect(response.status).toBe(200);
      const generationId = response.headers.get('x-generation-id') ?? '';
      const line = await lineOf(second, generationId);
      expect(JSON.parse(line)).toMatchObject({ message: 'generation usage', record: { generationId } });
      expect(second.output().stdout).not.toMatch(/^POST /m);
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
