import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The functions use Node and their libraries through public APIs only: a property whose name starts
 * with `_` (`_handle`, `_writeState`, `_processChunk`...) is a Node object's internals, which a runtime
 * update may change under the code (Lambda updates a runtime's Node on its own), as are
 * `process.binding` and `internalBinding`. Comments are left out of the search; strings are not
 * (`obj['_handle']` is the same access).
 */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return /\.(?:ts|cjs|mjs|js)$/.test(entry.name) ? [path] : [];
  });
}

/** The source without its comments (line and block), so that prose about internals is allowed. */
function withoutComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');
}

const PRIVATE_ACCESS = [
  { what: 'a property starting with _', pattern: /\??\.\s*_[A-Za-z$]|\[\s*['"`]_[A-Za-z$]/ },
  { what: 'process.binding', pattern: /\bprocess\s*\.\s*binding\b/ },
  { what: 'internalBinding', pattern: /\binternalBinding\b/ },
];

describe('functions/', () => {
  it('reads no Node internals: no `._` property, no process.binding, no internalBinding', () => {
    const found: string[] = [];
    for (const file of sources('functions')) {
      const lines = withoutComments(readFileSync(file, 'utf8')).split('\n');
      lines.forEach((line, i) => {
        for (const { what, pattern } of PRIVATE_ACCESS)
          if (pattern.test(line)) found.push(`${file}:${i + 1}: ${what}: ${line.trim()}`);
      });
    }
    expect(found).toEqual([]);
  });

  it('is searched by patterns that find such an access', () => {
    const caught = [
      'const handle = (gzip as any)._handle;',
      "const state = stream['_writeState'];",
      'result = this.handle?._processChunk(chunk, flag);',
      "const zlib = process.binding('zlib');",
      "const { Zlib } = internalBinding('zlib');",
    ];
    for (const line of caught)
      expect(PRIVATE_ACCESS.some(({ pattern }) => pattern.test(withoutComments(line)))).toBe(true);
    expect(PRIVATE_ACCESS.some(({ pattern }) => pattern.test(withoutComments('// see _handle')))).toBe(false);
  });
});
