import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * Size limits for the Lambda code, kept by the repository itself: a file that grows past its limit
 * is split by concern, not waved through. Under functions/: 400 lines a file; under
 * functions/completions/ (the request path a reviewer reads end to end): 250; a function's
 * handler.ts (its wiring: the chain is built in functions/shared/chain.ts): 60.
 */
const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.(ts|tsx|cjs|mjs|js)$/.test(entry.name) ? [path] : [];
  });
}

function lineCount(path: string): number {
  const text = readFileSync(path, 'utf8');
  return text.endsWith('\n') ? text.split('\n').length - 1 : text.split('\n').length;
}

function limitOf(path: string): number {
  if (path.endsWith('/handler.ts')) return 60;
  if (path.startsWith('functions/completions/')) return 250;
  return 400;
}

describe('the Lambda code keeps its size limits', () => {
  const files = sourceFiles(resolve(root, 'functions')).map((path) => relative(root, path));

  it('finds the code it checks', () => {
    expect(files).toContain('functions/completions/handler.ts');
    expect(files.length).toBeGreaterThan(40);
  });

  it('has no file over its limit (400 lines; 250 under completions/; 60 for a handler.ts)', () => {
    const over = files
      .map((path) => ({ path, lines: lineCount(resolve(root, path)), limit: limitOf(path) }))
      .filter(({ lines, limit }) => lines > limit)
      .map(({ path, lines, limit }) => `${path}: ${lines} lines (limit ${limit})`);
    expect(over).toEqual([]);
  });
});
