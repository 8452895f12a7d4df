import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const readme = readFileSync(resolve(root, 'README.md'), 'utf8');

describe('the README stands alone', () => {
  it('has no link or path that leaves the repository', () => {
    const leaving = [...readme.matchAll(/(?:\]\(|`)(\.\.\/[^)`\s]*)/g)].map((m) => m[1]);
    expect(leaving).toEqual([]);
  });

  it('links only to files that exist in the repository (or to web addresses)', () => {
    const targets = [...readme.matchAll(/\]\(([^)]+)\)/g)]
      .map((m) => m[1] ?? '')
      .filter((t) => !/^(https?:|mailto:|#)/.test(t));
    const missing = targets.filter((t) => !existsSync(resolve(root, t.split('#')[0] ?? '')));
    expect(missing).toEqual([]);
  });

  it('names only repository paths that exist, where it points at a file by path', () => {
    const named = [
      ...readme.matchAll(/`((?:functions|lib|bin|test|bench|scripts)\/[\w./-]+\.(?:ts|json|md|sh))`/g),
    ].map((m) => m[1] ?? '');
    expect(named.length).toBeGreaterThan(10);
    const missing = [...new Set(named)].filter((path) => !existsSync(resolve(root, path)));
    expect(missing).toEqual([]);
  });
});

describe('ARCHITECTURE.md stands alone', () => {
  const architecture = readFileSync(resolve(root, 'ARCHITECTURE.md'), 'utf8');

  it('is linked from the README', () => {
    expect(readme).toContain('](ARCHITECTURE.md)');
  });

  it('names only repository paths that exist, and nothing outside the repository', () => {
    expect([...architecture.matchAll(/(?:\]\(|`)(\.\.\/[^)`\s]*)/g)]).toEqual([]);
    const named = [
      ...architecture.matchAll(/`((?:functions|lib|bin|test|bench|scripts)\/[\w./-]+\.(?:ts|json|md|sh))`/g),
    ].map((m) => m[1] ?? '');
    expect(named.length).toBeGreaterThan(20);
    const missing = [...new Set(named)].filter((path) => !existsSync(resolve(root, path)));
    expect(missing).toEqual([]);
  });
});
