import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * A misconfigured synth through the real CDK CLI, as an operator meets it: it stops before anything
 * is bundled, exits non-zero, and says what is wrong in one line of the app's (`error: ...`), with no
 * stack trace. The CLI adds its own line after it ("Subprocess exited with error 1").
 */
const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '../..');
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** The environment without AWS credentials (nothing to find), with `set` added: the region, an account. */
function offlineEnv(set: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env))
    if (!/^(AWS_|CDK_)/.test(name) && value !== undefined) env[name] = value;
  return {
    ...env,
    AWS_CONFIG_FILE: '/nonexistent/aws-config',
    AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/aws-credentials',
    AWS_EC2_METADATA_DISABLED: 'true',
    ...set,
  };
}

/** The README's prod line's custom domain, which prod needs (the dashboard, where customers pay). */
const DOMAIN = [
  '-c',
  'domainName=api.example.com',
  '-c',
  'certificateArn=arn:aws:acm:us-east-1:123456789012:certificate/abc',
];

/** `npx cdk synth --quiet` with the README's prod flags, its custom domain included, and `more`. */
async function synth(env: Record<string, string>, ...more: string[]) {
  return synthWith(env, [...DOMAIN, ...more]);
}

/** `npx cdk synth --quiet` with the README's prod flags but its domain, and `more`; its exit code and standard error. */
async function synthWith(env: Record<string, string>, more: string[]) {
  const out = mkdtempSync(join(tmpdir(), 'synth-misconfigured-'));
  dirs.push(out);
  const args = [
    'cdk',
    'synth',
    '--quiet',
    '-o',
    out,
    '-c',
    'stage=prod',
    '-c',
    'tiersFile=config/tiers.example.json',
    '-c',
    'maxConcurrency=1000',
    '-c',
    'alarmEmail=ops@example.com',
    '-c',
    'monthlyBudgetUsd=200',
    ...more,
  ];
  try {
    const { stderr } = await run('npx', args, {
      cwd: ROOT,
      env: offlineEnv(env),
      maxBuffer: 16 * 1024 * 1024,
    });
    return { code: 0, stderr };
  } catch (error) {
    const e = error as { code: number; stderr: string };
    return { code: e.code, stderr: e.stderr };
  }
}

/** The app's own lines on standard error: the CLI's closing "Subprocess exited" line left out. */
const appLines = (stderr: string) =>
  stderr.split('\n').filter((line) => line.trim() !== '' && !/Subprocess exited with error/.test(line));

const WAF_REGION =
  /^error: a CLOUDFRONT-scope WAF web ACL can only be created in us-east-1, and this stack deploys to eu-west-1: .*-c webAclArn=.*-c waf=false$/;

describe('a prod synth for a region other than us-east-1, with neither webAclArn nor waf=false', () => {
  it('with no account set (an environment-agnostic stack, deployed to the CLI region): exit 1, one line', async () => {
    const result = await synth({ AWS_REGION: 'eu-west-1' });
    expect(result.code, result.stderr).toBe(1);
    expect(appLines(result.stderr)).toEqual([expect.stringMatching(WAF_REGION)]);
  }, 300_000);

  it('with an account set: exit 1, the same one line, no stack trace', async () => {
    const result = await synth({ AWS_REGION: 'eu-west-1', CDK_DEFAULT_ACCOUNT: '123456789012' });
    expect(result.code, result.stderr).toBe(1);
    expect(result.stderr).not.toMatch(/^\s+at /m);
    expect(appLines(result.stderr)).toEqual([expect.stringMatching(WAF_REGION)]);
  }, 300_000);

  it('any other misconfiguration, the app refuses the same way: one line, exit 1', async () => {
    const result = await synth({ AWS_REGION: 'us-east-1' }, '-c', 'monthlyBudgetUsd=-5');
    expect(result.code, result.stderr).toBe(1);
    expect(appLines(result.stderr)).toEqual(['error: monthlyBudgetUsd must be a positive number, got -5']);
  }, 300_000);
});

describe('where a customer pays: the custom domain, the topUpUrl, a sandbox dashboard origin', () => {
  it('a prod synth without a custom domain stops: one line, exit 1 (no dashboard, so no way to pay)', async () => {
    const result = await synthWith({ AWS_REGION: 'us-east-1' }, []);
    expect(result.code, result.stderr).toBe(1);
    expect(result.stderr).not.toMatch(/^\s+at /m);
    expect(appLines(result.stderr)).toEqual([
      expect.stringMatching(
        /^error: the prod stage needs a custom domain: -c domainName=<name> -c certificateArn=.*no customer can pay$/,
      ),
    ]);
  }, 300_000);

  it('a placeholder topUpUrl stops the synth: one line, exit 1', async () => {
    const result = await synth(
      { AWS_REGION: 'us-east-1' },
      '-c',
      'topUpUrl=https://dashboard.example.com/settings/billing',
    );
    expect(result.code, result.stderr).toBe(1);
    expect(appLines(result.stderr)).toEqual([
      expect.stringMatching(/^error: topUpUrl must be a page of your own .*\(dashboard\.example\.com\)/),
    ]);
  }, 300_000);

  it("a sandbox's dashboardOrigin with a path stops the synth: one line, exit 1", async () => {
    const result = await synthWith({ AWS_REGION: 'us-east-1' }, [
      '-c',
      'stage=sandbox',
      '-c',
      'dashboardOrigin=https://d111111abcdef8.cloudfront.net/dashboard',
    ]);
    expect(result.code, result.stderr).toBe(1);
    expect(appLines(result.stderr)).toEqual([
      expect.stringMatching(/^error: dashboardOrigin must be an https origin with no path .*it has a path/),
    ]);
  }, 300_000);
});
