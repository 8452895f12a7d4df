import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { runAdmin } from '../support/admin-cli.js';
import { cliTables } from '../support/cli-tables.js';

/**
 * The README's operator commands run as written: the set-up section's tips (after `npm start` made
 * the `dev` account) and the "Operator CLI" section's example block, in order, against DynamoDB Local.
 */
const run = promisify(execFile);
const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const PREFIX = 'npm run --silent admin -- ';
const { env } = cliTables(`tips${randomBytes(3).toString('hex')}-`);

function section(heading: string): string {
  const start = README.indexOf(`\n${heading}\n`);
  expect(start, heading).toBeGreaterThan(-1);
  const end = README.indexOf('\n## ', start + heading.length + 1);
  return README.slice(start, end === -1 ? undefined : end);
}

/** The arguments of a README command line: after the prefix, up to a `#` comment or a closing backtick. */
const argsOf = (command: string) =>
  command
    .slice(PREFIX.length)
    .replace(/\s+#.*$/, '')
    .trim()
    .split(/\s+/);

const admin = (args: string[]) => runAdmin(args, env);

describe('README operator commands', () => {
  it('the set-up tips run as written, in their own process through npm, on the account npm start makes', async () => {
    const tips = [...section('## Set up, run, test').matchAll(/`(npm run --silent admin -- [^`]+)`/g)].map(
      (m) => m[1] ?? '',
    );
    expect(tips.length).toBeGreaterThan(0);
    expect(await admin(['account', 'create', 'dev', '--credits', '5'])).toMatchObject({ code: 0 });
    for (const tip of tips) {
      const { stdout } = await run('npm', ['run', '--silent', 'admin', '--', ...argsOf(tip)], { env });
      expect(stdout, tip).not.toBe('');
    }
    expect((await admin(['account', 'show', 'dev', '--json'])).stdout).toContain('"creditBalance":"105"');
  }, 120_000);

  it('the Operator CLI examples run as written, in order (the key id and the log file are the only stand-ins)', async () => {
    const block = /```\n([\s\S]*?)```/.exec(section('## Operator CLI'))?.[1] ?? '';
    const lines = block.split('\n').filter((line) => line.startsWith(PREFIX));
    expect(lines.length).toBeGreaterThan(10);
    const log = join(mkdtempSync(join(tmpdir(), 'readme-tips-')), 'usage.log');
    writeFileSync(log, '');
    let keyId = '';
    for (const line of lines) {
      const args = argsOf(line).map((arg) =>
        arg === 'key_0123456789abcdef' ? keyId : arg === 'usage.log' ? log : arg,
      );
      const result = await admin(args);
      expect(result.code, `${line}\n${result.stderr}`).toBe(0);
      keyId ||= /created key (key_[0-9a-f]+)/.exec(result.stdout)?.[1] ?? '';
    }
    expect(keyId).not.toBe('');
  });
});
