import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * The README's deploy commands, copied out of the README (the block after the `deploy-commands`
 * marker) and run through the real CDK CLI: each `npx cdk deploy` as `npx cdk synth --quiet` with the
 * same flags, `npm run synth` as it is, the other lines (cp) as they are; `npx cdk bootstrap` and the
 * `aws` lines (the quota check) are skipped (they need an account). No AWS credentials are reachable:
 * synth must need none and look nothing up.
 */
const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '../..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** The marked block's commands, continuation lines joined, comments and blank lines dropped. */
function deployCommands(markdown: string): string[] {
  const block = /<!-- deploy-commands[^>]*-->\n```[^\n]*\n([\s\S]*?)\n```/.exec(markdown)?.[1];
  if (block === undefined) throw new Error('README has no block after a <!-- deploy-commands --> marker');
  return block
    .replace(/\\\n\s*/g, '')
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => line !== '');
}

const COMMANDS = deployCommands(README);
const CDK = /^(npx cdk (?:deploy|synth)\b|npm run synth\b)/;
/** The lines that need the account, skipped here: bootstrap, and the AWS CLI's quota check. */
const NEEDS_ACCOUNT = /^(npx cdk bootstrap|aws)\b/;
/** A `-c name=value` of a command line. */
const contextValue = (command: string, name: string) => new RegExp(`-c ${name}=(\\S+)`).exec(command)?.[1];

/** Only what the CLI needs, and nothing that finds AWS credentials (no profile, no instance metadata). */
function offlineEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env))
    if (!/^(AWS_|CDK_)/.test(name) && value !== undefined) env[name] = value;
  return {
    ...env,
    AWS_CONFIG_FILE: '/nonexistent/aws-config',
    AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/aws-credentials',
    AWS_EC2_METADATA_DISABLED: 'true',
  };
}

/** A working directory like a fresh checkout: the repository's files (linked), none of its cdk.out. */
const dirs: string[] = [];
function checkout(): string {
  const dir = mkdtempSync(join(tmpdir(), 'readme-deploy-'));
  dirs.push(dir);
  for (const name of [
    'bin',
    'lib',
    'functions',
    'config',
    'node_modules',
    'cdk.json',
    'package.json',
    'package-lock.json',
    'tsconfig.json',
  ])
    symlinkSync(join(ROOT, name), join(dir, name));
  return dir;
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * Runs the README's lines up to and including the `index`th, in a fresh directory: the shell lines
 * (cp) before it, then it (deploy as synth). Returns the cloud assembly's directory.
 */
async function runThrough(index: number): Promise<{ out: string; stderr: string }> {
  const dir = checkout();
  const lines = COMMANDS.slice(0, index + 1).filter((line, i) => i === index || !CDK.test(line));
  const script = lines
    .filter((line) => !NEEDS_ACCOUNT.test(line))
    .map((line) => line.replace(/^npx cdk deploy\b/, 'npx cdk synth --quiet'))
    .join('\n');
  const { stderr } = await run('bash', ['-euo', 'pipefail', '-c', script], {
    cwd: dir,
    env: offlineEnv(),
    maxBuffer: 16 * 1024 * 1024,
  });
  return { out: join(dir, 'cdk.out'), stderr };
}

const manifest = (out: string) =>
  JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8')) as {
    missing?: unknown[];
    artifacts: Record<string, { type: string }>;
  };
const template = (out: string, stack: string) =>
  JSON.parse(readFileSync(join(out, `${stack}.template.json`), 'utf8')) as {
    Resources: Record<string, { Type: string; Properties?: Record<string, unknown> }>;
  };

describe("the README's deploy commands", () => {
  it('are marked, and deploy the sandbox and prod', () => {
    expect(COMMANDS[0]).toMatch(/^npx cdk bootstrap\b/);
    expect(COMMANDS.filter((c) => c.startsWith('npx cdk deploy -c stage=sandbox'))).toHaveLength(1);
    expect(COMMANDS.filter((c) => c.startsWith('npx cdk deploy -c stage=prod'))).toHaveLength(1);
    expect(COMMANDS).toContain('npm run synth');
  });

  it("check the account's concurrency quota before the first deploy, and reserve nothing a new account cannot spare", () => {
    const quota = COMMANDS.findIndex((c) => /^aws lambda get-account-settings\b/.test(c));
    const firstDeploy = COMMANDS.findIndex((c) => c.startsWith('npx cdk deploy'));
    expect(quota).toBeGreaterThan(0);
    expect(quota).toBeLessThan(firstDeploy);
    // The prod line gives the overdraft bound its concurrency without a reservation.
    const prod = COMMANDS.find((c) => c.startsWith('npx cdk deploy -c stage=prod')) ?? '';
    expect(contextValue(prod, 'maxConcurrency')).toMatch(/^\d+$/);
    expect(contextValue(prod, 'reservedConcurrency')).toBeUndefined();
    expect(COMMANDS.join('\n')).not.toMatch(/reserveSweeper=true/);
  });

  it('say to confirm the alarm e-mail subscription after the deploy, and how to check it', () => {
    const section = README.slice(
      README.indexOf('## Deploy to AWS'),
      README.indexOf('\n## ', README.indexOf('## Deploy to AWS') + 1),
    );
    expect(section).toMatch(/confirm the alarm e-mail/);
    expect(section).toMatch(/PendingConfirmation/);
    expect(section).toMatch(/AccountLimit\.ConcurrentExecutions/);
    expect(section).toMatch(/AccountLimit\.UnreservedConcurrentExecutions/);
  });

  it('write no file git would commit: what a `cp` line makes (tiers.json) is ignored by git', async () => {
    const written = COMMANDS.map((c) => /^cp\s+\S+\s+(\S+)$/.exec(c)?.[1]).filter(
      (path): path is string => path !== undefined,
    );
    expect(written).toContain('tiers.json');
    for (const path of written) {
      // Exit 0 and the path named: ignored; exit 1: git would offer the operator's tier routing for a commit.
      const ignored = await run('git', ['check-ignore', '--no-index', path], { cwd: ROOT }).catch(
        (error: { code: number }) => ({ stdout: `exit ${error.code}` }),
      );
      expect(ignored.stdout.trim(), path).toBe(path);
    }
  });

  it('synthesize the sandbox with `npm run synth` too: the same synth as the sandbox deploy line', () => {
    // Run once, not twice (a synth takes 30-40 s here): the script adds only --no-notices to
    // `cdk synth --quiet`, and the default stage is the sandbox.
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      scripts: { synth: string };
    };
    expect(pkg.scripts.synth).toBe('cdk synth --quiet --no-notices');
    const cdkJson = JSON.parse(readFileSync(join(ROOT, 'cdk.json'), 'utf8')) as {
      context: { stage: string };
    };
    expect(cdkJson.context.stage).toBe('sandbox');
  });

  const synths = COMMANDS.map((command, index) => ({ command, index })).filter(
    ({ command }) => CDK.test(command) && command !== 'npm run synth',
  );
  it.each(synths)(
    'synthesize through the CDK CLI with no AWS credentials: $command',
    async ({ command, index }) => {
      const { out, stderr } = await runThrough(index);
      // Every feature flag of this aws-cdk-lib is set in cdk.json: the CLI has nothing to say about them.
      expect(stderr).not.toMatch(/feature flags are not configured/);
      // Nothing left for a lookup (an environment-agnostic stack synthesizes offline).
      expect(manifest(out).missing).toBeUndefined();
      const stage = /-c stage=prod\b/.test(command) ? 'prod' : 'sandbox';
      const stack = `HostedModelApi-${stage}`;
      expect(existsSync(join(out, `${stack}.template.json`))).toBe(true);
      if (stage === 'prod') {
        // The whole example file reached the completions function, not its first line.
        const functions = Object.values(template(out, stack).Resources).filter(
          (r) => r.Type === 'AWS::Lambda::Function',
        );
        const variables = functions.map(
          (r) => (r.Properties?.Environment as { Variables?: Record<string, string> })?.Variables ?? {},
        );
        const tiers = variables.find((v) => v.TIERS_CONFIG !== undefined)?.TIERS_CONFIG;
        expect(JSON.parse(tiers ?? 'null')).toEqual(
          JSON.parse(readFileSync(join(ROOT, 'config/tiers.example.json'), 'utf8')),
        );
        // -c maxConcurrency reached the overdraft bound (bin/app.ts), and nothing is reserved.
        const completions = variables.find((v) => v.TIERS_CONFIG !== undefined);
        expect(completions?.MAX_CONCURRENCY).toBe(contextValue(command, 'maxConcurrency'));
        expect(functions.filter((r) => r.Properties?.ReservedConcurrentExecutions !== undefined)).toEqual([]);
      }
    },
    480_000,
  );

  it('would have failed the old way: a multi-line -c value reaches the app as its first line, and is refused by name', async () => {
    const dir = checkout();
    const failure = await run(
      'bash',
      [
        '-c',
        'npx cdk synth --quiet -c stage=prod -c tiersConfig="$(cat config/tiers.example.json)" -c reservedConcurrency=100 -c alarmEmail=ops@example.com -c monthlyBudgetUsd=200',
      ],
      { cwd: dir, env: offlineEnv(), maxBuffer: 16 * 1024 * 1024 },
    ).catch((error: { code: number; stderr: string }) => error);
    expect(failure).toMatchObject({ code: 1 });
    expect((failure as { stderr: string }).stderr).toMatch(/tiersConfig is not JSON.*-c tiersFile=<path>/);
  }, 480_000);
});
