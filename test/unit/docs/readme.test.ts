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

/** The text outside fenced code blocks (where a `#` line is a shell comment, not a heading). */
const prose = (markdown: string) => markdown.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '');

/** The anchors GitHub gives a document's headings: lower case, punctuation dropped, spaces as hyphens. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, text] of prose(markdown).matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const slug = (text ?? '')
      .replace(/`/g, '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

/** Every relative link of a document (in its prose) whose file or anchor is missing. */
function brokenLinks(markdown: string, dir: string): string[] {
  return fileLinksAndAnchors(prose(markdown)).filter((target) => {
    const [path = '', anchor] = target.split('#');
    const file = path === '' ? undefined : resolve(dir, path);
    if (file !== undefined && !existsSync(file)) return true;
    if (anchor === undefined) return false;
    if (file !== undefined && !file.endsWith('.md')) return false;
    const text = file === undefined ? markdown : readFileSync(file, 'utf8');
    return !anchors(text).has(anchor);
  });
}

/** Links that are not web addresses, anchors within the page included. */
const fileLinksAndAnchors = (markdown: string) =>
  [...markdown.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1] ?? '')
    .filter((t) => !/^(https?:|mailto:)/.test(t));

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
    // The README is short and points to docs/ for the rest: the pattern is checked to find paths in
    // the README and docs/*.md together (each document's paths are checked below).
    const docsNamed = readdirSync(resolve(root, 'docs'))
      .filter((name) => name.endsWith('.md'))
      .flatMap((name) => namedPaths(readFileSync(resolve(root, 'docs', name), 'utf8')));
    expect(named.length).toBeGreaterThan(2);
    expect(named.length + docsNamed.length).toBeGreaterThan(10);
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

describe("the README is a newcomer's document", () => {
  it('is at most 600 lines: the reference lives under docs/', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(600);
  });

  it('says what is not offered near the top, before setting up', () => {
    const limits = readme.indexOf('\n## Known limitations\n');
    expect(limits).toBeGreaterThan(-1);
    expect(limits).toBeLessThan(readme.indexOf('\n## Set up, run, test\n'));
  });

  it('every relative link, in the README and in docs/*.md, reaches a file and heading that exist', () => {
    const broken = [
      ...brokenLinks(readme, root).map((t) => `README.md: ${t}`),
      ...readdirSync(resolve(root, 'docs'))
        .filter((name) => name.endsWith('.md'))
        .flatMap((name) =>
          brokenLinks(readFileSync(resolve(root, 'docs', name), 'utf8'), resolve(root, 'docs')).map(
            (t) => `docs/${name}: ${t}`,
          ),
        ),
    ];
    expect(broken).toEqual([]);
  });

  it('the anchors are computed as GitHub does', () => {
    expect([...anchors('# A\n## `npm start`, in more detail\n## E-mail: alerts (x)\n## A\n')]).toEqual([
      'a',
      'npm-start-in-more-detail',
      'e-mail-alerts-x',
      'a-1',
    ]);
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
