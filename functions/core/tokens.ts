/**
 * Token estimates with a real tokenizer (o200k_base), for when an upstream reports no usage.
 * The tokenizer's tables are large, so they load on first use, never on the hot path of a request
 * whose upstream reports usage.
 */
type Encoder = (text: string) => number;
let counter: Promise<Encoder> | undefined;

/**
 * Text that spells a special token ("<|endoftext|>") is counted as the text it is, as an upstream
 * counts a caller's content; by default the tokenizer throws on it, which would let any caller make
 * the estimate, and so the bill, fail.
 */
export const SPECIAL_TOKENS_AS_TEXT = { disallowedSpecial: new Set<string>() };

/**
 * Byte-pair encoding is quadratic in the length of each piece the tokenizer's splitter makes, and a
 * caller decides those lengths: a 200,000-letter "word" took 23 s to count, 400,000 took 100 s, past
 * the function's timeout at a small CPU share, and the request would go unbilled. The splitter (o200k)
 * never makes a piece that mixes whitespace and other characters except one leading space, or
 * punctuation followed by newlines and slashes; so any run of non-whitespace, of whitespace, or of
 * newlines and slashes longer than LONGEST_RUN is counted in pieces of that length. Ordinary text (no
 * such run) is counted exactly, a long run within a token or so a piece.
 */
export const LONGEST_RUN = 256;
const LONG_RUN = new RegExp(
  `\\S{${LONGEST_RUN + 1},}|\\s{${LONGEST_RUN + 1},}|[\\r\\n/]{${LONGEST_RUN + 1},}`,
  'g',
);

/** `count(text)`, with every run LONG_RUN matches counted in pieces of at most LONGEST_RUN. */
export function countWithBoundedRuns(count: (text: string) => number, text: string): number {
  let total = 0;
  let from = 0;
  for (const run of text.matchAll(LONG_RUN)) {
    if (run.index > from) total += count(text.slice(from, run.index));
    for (let at = 0; at < run[0].length; at += LONGEST_RUN)
      total += count(run[0].slice(at, at + LONGEST_RUN));
    from = run.index + run[0].length;
  }
  return from === 0 ? count(text) : total + (from < text.length ? count(text.slice(from)) : 0);
}

/**
 * The tokenizer remembers the tokens of the words it merged, 100,000 of them by default. Text of many
 * distinct words (identifiers, hashes, random-looking data) fills that cache without ever hitting it:
 * 300,000 distinct made-up words took 14 s to count and left 27 MiB in the heap; with no cache, 2.0 s
 * and nothing (1,000 entries: 2.4 s). In the function (160 MB's heap limits), three 5.5 MiB requests of
 * such words, estimated, peaked at 135-151 MiB of RSS with 1,000 entries (what the cache keeps lives
 * long enough to be promoted) and at 125 MiB with none. Ordinary prose counts as fast without it; source
 * code, whose words repeat, 1.25x slower. (Node 22; test/unit/core/tokens.test.ts.)
 */
export const MERGE_CACHE_SIZE = 0;

function loadCounter(): Promise<Encoder> {
  counter ??= import('gpt-tokenizer').then((module) => {
    module.setMergeCacheSize(MERGE_CACHE_SIZE);
    return (text: string) =>
      countWithBoundedRuns((piece) => module.countTokens(piece, SPECIAL_TOKENS_AS_TEXT), text);
  });
  return counter;
}

/** Per-message overhead of OpenAI's chat format: 3 tokens per message plus 3 to prime the reply. */
const PER_MESSAGE = 3;
const REPLY_PRIMER = 3;

export interface MessageLike {
  content?: unknown;
  tool_calls?:
    | readonly {
        function?: { name: string; arguments: string } | undefined;
        custom?: { name: string; input: string } | undefined;
      }[]
    | null
    | undefined;
}

function textOfContent(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part: unknown) => {
      const p = part as { text?: unknown; refusal?: unknown };
      return typeof p.text === 'string' ? p.text : typeof p.refusal === 'string' ? p.refusal : '';
    })
    .join('');
}

/** Text longer than this is counted a slice at a time, so that a deadline is looked at between slices. */
export const COUNT_SLICE = 65_536;

/**
 * A deadline for counting. Counting costs up to 2.4 us a character (random CJK text; prose 0.03 us), and
 * at 160 MB a function gets 9% of a vCPU: the largest request a Function URL takes (6 MB, 2 million
 * such characters) would take about 53 s to count, past a JSON reply's settlement deadline (CloudFront
 * waits 60 s) once its upstream took 6 s, and the generation would go unbilled. So what is not counted
 * by the deadline is estimated at the rate counted so far (tokens per UTF-8 byte), a slice at least
 * being counted; the bytes so estimated are kept in `extrapolatedBytes` (the ledger entry says so).
 */
export class CountBudget {
  extrapolatedBytes = 0;
  private countedBytes = 0;
  private countedTokens = 0;

  constructor(
    readonly deadline: number,
    private readonly now: () => number = Date.now,
    /** Counting also stops once more than this many tokens are counted (the rest estimated alike). */
    private readonly enoughTokens = Number.POSITIVE_INFINITY,
  ) {}

  /** `count(text)`, a slice at a time, each ending at whitespace where there is some near its end. */
  count(count: (text: string) => number, text: string): number {
    let total = 0;
    for (let at = 0; at < text.length; ) {
      if (this.countedBytes > 0 && (this.countedTokens > this.enoughTokens || this.now() >= this.deadline)) {
        const rest = Buffer.byteLength(at === 0 ? text : text.slice(at));
        this.extrapolatedBytes += rest;
        return total + Math.ceil((rest * this.countedTokens) / this.countedBytes);
      }
      const end = sliceEnd(text, at);
      const slice = at === 0 && end === text.length ? text : text.slice(at, end);
      const tokens = count(slice);
      total += tokens;
      this.countedTokens += tokens;
      this.countedBytes += Buffer.byteLength(slice);
      at = end;
    }
    return total;
  }
}

/** Where the slice from `at` ends: COUNT_SLICE on, moved back to whitespace within its last LONGEST_RUN characters. */
function sliceEnd(text: string, at: number): number {
  const end = at + COUNT_SLICE;
  if (end >= text.length) return text.length;
  for (let i = end; i > end - LONGEST_RUN; i--) if (/\s/.test(text.charAt(i))) return i;
  return end;
}

/** No deadline: everything counted. */
const UNBOUNDED = { count: (count: (text: string) => number, text: string) => count(text) };

export async function estimatePromptTokens(
  messages: readonly MessageLike[],
  budget: Pick<CountBudget, 'count'> = UNBOUNDED,
): Promise<number> {
  const countTokens = await loadCounter();
  let total = REPLY_PRIMER;
  for (const message of messages) {
    total += PER_MESSAGE + budget.count(countTokens, textOfContent(message.content));
    for (const call of message.tool_calls ?? [])
      total += budget.count(
        countTokens,
        call.function
          ? call.function.name + call.function.arguments
          : `${call.custom?.name ?? ''}${call.custom?.input ?? ''}`,
      );
  }
  return total;
}

export async function estimateTextTokens(
  text: string,
  budget: Pick<CountBudget, 'count'> = UNBOUNDED,
): Promise<number> {
  if (text === '') return 0;
  const countTokens = await loadCounter();
  return budget.count(countTokens, text);
}
