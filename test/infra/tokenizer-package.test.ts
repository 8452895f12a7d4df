import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encode } from 'gpt-tokenizer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTokenizerPackage } from '../../lib/infra/tokenizer-package.js';

/** The tokenizer package shipped beside the function bundles: its ranks read as data, its tokens unchanged. */
let dir: string;
let outDir: string;
beforeAll(async () => {
  outDir = mkdtempSync(join(tmpdir(), 'tokenizer-package-'));
  dir = await buildTokenizerPackage(outDir);
}, 60_000);
afterAll(() => rmSync(outDir, { recursive: true, force: true }));

describe('the tokenizer package', () => {
  it('holds the ranks as a JSON file, not as code in its module', () => {
    expect(statSync(join(dir, 'index.mjs')).size).toBeLessThan(100_000);
    const ranks = JSON.parse(readFileSync(join(dir, 'o200k_base.json'), 'utf8')) as unknown[];
    expect(ranks.length).toBeGreaterThan(199_000);
    expect(JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))).toMatchObject({
      name: 'gpt-tokenizer',
      type: 'module',
    });
  });

  it('encodes exactly as the library does, byte-level tokens included', async () => {
    const built = (await import(join(dir, 'index.mjs'))) as {
      encode: typeof encode;
      countTokens: (text: string) => number;
      setMergeCacheSize: (size: number) => void;
    };
    const texts = [
      'Summarise the history of the printing press in a few paragraphs.',
      'export const MERGE_CACHE_SIZE = 1_000; // identifiers_and_snake_case',
      '日本語のテキストと中文文本，한국어 텍스트 and emoji 🧪🚀👩‍👩‍👧',
      'bytes that are not UTF-8 on their own: \u00ff\u00fe, \ud83d\ude00, tabs\t\tand\r\nlines',
      `${'deadbeef'.repeat(40)} ${'x'.repeat(300)}`,
    ];
    for (const text of texts) {
      expect(built.encode(text)).toEqual(encode(text));
      expect(built.countTokens(text)).toBe(encode(text).length);
    }
    expect(typeof built.setMergeCacheSize).toBe('function');
  });
});
