/**
 * Real token counts (o200k_base), as an OpenAI-compatible upstream reports them: special tokens as
 * text, long runs in pieces, and the tokenizer's cache bounded (core/tokens.ts), so no prompt can
 * stall it.
 */
import { countTokens, setMergeCacheSize } from 'gpt-tokenizer';
import { countWithBoundedRuns, MERGE_CACHE_SIZE, SPECIAL_TOKENS_AS_TEXT } from '../core/tokens.js';

setMergeCacheSize(MERGE_CACHE_SIZE);

export function countTextTokens(text: string): number {
  return text === '' ? 0 : countWithBoundedRuns((piece) => countTokens(piece, SPECIAL_TOKENS_AS_TEXT), text);
}

interface SimMessage {
  content?: unknown;
}

export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part: { text?: unknown }) => (typeof part?.text === 'string' ? part.text : ''))
    .join('');
}

/** OpenAI's chat accounting: the content tokens plus 3 per message, plus 3 to prime the reply. */
export function countPromptTokens(messages: readonly SimMessage[]): number {
  return messages.reduce((sum, message) => sum + 3 + countTextTokens(textOf(message.content)), 3);
}

/** Words that are each exactly one token with their leading space, so N words are N tokens. */
export const ONE_TOKEN_WORDS = [
  'the',
  'model',
  'answer',
  'is',
  'a',
  'simple',
  'reply',
  'from',
  'upstream',
  'simulator',
  'with',
  'tokens',
  'and',
  'every',
  'word',
  'counts',
  'as',
  'one',
  'token',
  'here',
  'today',
  'quick',
  'brown',
  'fox',
  'jumps',
  'over',
  'lazy',
  'dog',
  'data',
  'result',
  'value',
  'test',
  'stream',
  'chunk',
  'final',
  'light',
  'river',
  'stone',
  'cloud',
  'green',
].map((word) => ` ${word}`);
