import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const readme = readFileSync(resolve(root, 'README.md'), 'utf8');

/** Repository paths a document names in backticks, relative to the repository's root. */
const namedPaths = (markdown: string) =>
  [
    ...markdown.matchAll(/`((?:functions|lib|bin|test|bench|scripts|docs)\/[\w./-]+\.(?:ts|json|md|sh))`/g),
  ].map((m) => m[1] ?? '');

/** Links that are not web addresses or anchors, as written. */
const fileLinks = (markdown: string) =>
  [...markdown.matchAll(/\]\(([^)]+)\)/g)]
    .map((m) => m[1] ?? '')
    .filter((t) => !/^(https?:|mailto:|#)/.test(t));

describe('the README stands alone', () => {
  it('has no link or path that leaves the repository', () => {
    const leaving = [...readme.matchAll(/(?:\]\(|`)(\.\.\/[^)`\s]*)/g)].map((m) => m[1]);
    expect(leaving).toEqual([]);
  });

  it('links only to files that exist in the repository (or to web addresses)', () => {
    const missing = fileLinks(readme).filter((t) => !existsSync(resolve(root, t.split('#')[0] ?? '')));
    expect(missing).toEqual([]);
  });

  it('names only repository paths that exist, where it points at a file by path', () => {
    const named = namedPaths(readme);
    expect(named.length).toBeGreaterThan(10);
    const missing = [...new Set(named)].filter((path) => !existsSync(resolve(root, path)));
    expect(missing).toEqual([]);
  });
});

describe('the documents under docs/ stand alone', () => {
  const docs = readdirSync(resolve(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => ({ name, text: readFileSync(resolve(root, 'docs', name), 'utf8') }));

  it('are each linked from the README', () => {
    expect(docs.length).toBeGreaterThan(0);
    const unlinked = docs.filter(({ name }) => !readme.includes(`](docs/${name})`)).map(({ name }) => name);
    expect(unlinked).toEqual([]);
  });

  it.each(docs)('$name links only to files inside the repository that exist', ({ text }) => {
    const wrong = fileLinks(text).filter((t) => {
      const target = resolve(root, 'docs', t.split('#')[0] ?? '');
      return relative(root, target).startsWith('..') || !existsSync(target);
    });
    expect(wrong).toEqual([]);
  });

  it.each(docs)('$name names only repository paths that exist', ({ text }) => {
    expect([...text.matchAll(/`(\.\.\/[^`\s]*)/g)].map((m) => m[1])).toEqual([]);
    const missing = [...new Set(namedPaths(text))].filter((path) => !existsSync(resolve(root, path)));
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
    const named = namedPaths(architecture);
    expect(named.length).toBeGreaterThan(20);
    const missing = [...new Set(named)].filter((path) => !existsSync(resolve(root, path)));
    expect(missing).toEqual([]);
  });
});
