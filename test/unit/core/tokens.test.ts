import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { countTokens } from 'gpt-tokenizer';
import { describe, expect, it } from 'vitest';
import {
  COUNT_SLICE,
  CountBudget,
  countWithBoundedRuns,
  estimatePromptTokens,
  estimateTextTokens,
  LONGEST_RUN,
  SPECIAL_TOKENS_AS_TEXT,
} from '../../../functions/core/tokens.js';

/**
 * The usage estimate (when an upstream reports none) must finish, whatever a caller sends: byte-pair
 * encoding is quadratic in the length of a run without whitespace (a 200,000-letter "word" took 23 s
 * here, 400,000 took 100 s: at 256 MB's CPU share, past the function's timeout, so the request would
 * go unbilled). Runs longer than LONGEST_RUN are counted in pieces.
 */
const exact = (text: string) => countTokens(text, SPECIAL_TOKENS_AS_TEXT);

describe('token estimates', () => {
  it('count ordinary text exactly as the tokenizer does', async () => {
    const texts = [
      'The quick brown fox jumps over the lazy dog. ',
      'function add(a, b) {\n  return a + b;\n}\n',
      '海は灰色の空の下で続く。船は家に帰る。',
      '{"key": [1, 2, 3], "nested": {"deep": true}}',
      `a URL: https://example.com/${'segment/'.repeat(20)}`,
    ];
    for (const text of texts) expect(await estimateTextTokens(text)).toBe(exact(text));
    expect(countWithBoundedRuns(exact, texts.join('\n'))).toBe(exact(texts.join('\n')));
  });

  it('counts a long run in pieces, within 1% of the exact count', () => {
    const letters = Array.from({ length: 20_000 }, (_, i) => String.fromCharCode(97 + ((i * 7) % 26))).join(
      '',
    );
    const text = `before ${letters} after`;
    const bounded = countWithBoundedRuns(exact, text);
    const truth = exact(text);
    expect(Math.abs(bounded - truth) / truth).toBeLessThan(0.01);
    expect(LONGEST_RUN).toBeGreaterThanOrEqual(128);
  });

  it.each([
    ['whitespace', ' '.repeat(200_000)],
    ['tabs before a word', `${'\t'.repeat(200_000)}x`],
    ['punctuation, newlines and slashes', `!${'\n/'.repeat(100_000)}`],
  ])('finishes on a 200,000-character run of %s (unbounded: over 20 s)', async (_, text) => {
    // Each of these is one piece to the tokenizer's splitter: 50,000 characters of them took 1.0-1.4 s.
    const started = performance.now();
    expect(await estimateTextTokens(text)).toBeGreaterThan(0);
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it('finishes on a 400,000-character run (unbounded: about 100 s) and on a prompt made of them', async () => {
    const started = performance.now();
    const count = await estimateTextTokens('a'.repeat(400_000));
    expect(count).toBeGreaterThan(40_000);
    const prompt = await estimatePromptTokens([{ content: `${'x'.repeat(200_000)} ${'!'.repeat(200_000)}` }]);
    expect(prompt).toBeGreaterThan(0);
    expect(performance.now() - started).toBeLessThan(5_000);
  }, 10_000);
});

describe('the tokenizer cache', () => {
  it('stays small however many distinct words an estimate counts', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    await estimateTextTokens('warm up: load the tokenizer');
    // 300,000 distinct made-up words (xorshift32), none of them one token: each is merged, and cached.
    let seed = 7;
    const letters = 'bcdfghjklmnpqrstvwxz';
    const word = () => {
      let out = '';
      for (let i = 0; i < 7; i++) {
        seed ^= seed << 13;
        seed ^= seed >>> 17;
        seed ^= seed << 5;
        out += letters[(seed >>> 0) % letters.length];
      }
      return out;
    };
    let text: string | undefined = Array.from({ length: 300_000 }, word).join(' ');
    gc();
    const before = process.memoryUsage().heapUsed;
    expect(await estimateTextTokens(text)).toBeGreaterThan(1_000_000);
    text = undefined;
    gc();
    // The library's default cache (100,000 words) kept 27 MiB after this text, and took 7x as long.
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(4 * 1024 * 1024);
  });
});

describe('counting against a deadline (CountBudget)', () => {
  const prose = (chars: number) => {
    const words = ['the', 'sea', 'rolls', 'on,', 'under', 'grey', 'skies;', 'boats', 'come', 'home.\n'];
    let text = '';
    for (let i = 0; text.length < chars; i++) text += `${words[(i * 7) % words.length]} `;
    return text;
  };

  it('counts exactly, slice by slice, while the deadline is not reached', async () => {
    const text = prose(5 * COUNT_SLICE);
    const budget = new CountBudget(Number.POSITIVE_INFINITY);
    expect(await estimateTextTokens(text, budget)).toBe(exact(text));
    expect(budget.extrapolatedBytes).toBe(0);
  });

  it('estimates what is left at the deadline at the rate counted so far', async () => {
    const text = prose(10 * COUNT_SLICE);
    let clock = 0;
    // Each look at the clock advances it: the deadline passes after three slices.
    const budget = new CountBudget(3, () => clock++);
    const estimated = await estimateTextTokens(text, budget);
    expect(budget.extrapolatedBytes).toBeGreaterThan(6 * COUNT_SLICE);
    expect(budget.extrapolatedBytes).toBeLessThan(Buffer.byteLength(text) - 2 * COUNT_SLICE);
    expect(Math.abs(estimated - exact(text)) / exact(text)).toBeLessThan(0.01);
  });

  it('counts one slice even when the deadline has passed, and estimates every later text at its rate', async () => {
    const budget = new CountBudget(0, () => 1);
    const first = prose(3 * COUNT_SLICE);
    const prompt = await estimatePromptTokens([{ content: first }, { content: prose(COUNT_SLICE) }], budget);
    expect(budget.extrapolatedBytes).toBeGreaterThan(3 * COUNT_SLICE);
    const counted = exact(first) + exact(prose(COUNT_SLICE)) + 9;
    expect(Math.abs(prompt - counted) / counted).toBeLessThan(0.02);
  });
});
