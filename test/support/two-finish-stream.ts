/**
 * An upstream stream that reports its usage, cost included, on a chunk that still has choices: the
 * second of two finish chunks (some providers behind OpenRouter end so), with `\r\n\r\n` between the
 * early events and `: PROCESSING` comments among them, then `[DONE]`; and the same reply as JSON. The
 * stream is cut into pieces at awkward bytes: inside every CRLF pair, inside the comments, inside an
 * event's `data:` field name and inside the cost's digits.
 */
import type { ServerResponse } from 'node:http';

export const TWO_FINISH_COST = '0.000123456';
/** 1.3 x the reported cost (0.0001604928 USD), rounded up to the next nano-USD. */
export const TWO_FINISH_BILLED_NANO = 160_493n;
export const TWO_FINISH_TOKENS = { prompt: 21, completion: 17 };
const USAGE = `{"prompt_tokens":21,"completion_tokens":17,"total_tokens":38,"cost":${TWO_FINISH_COST}}`;

const envelope = { id: 'up-1', object: 'chat.completion.chunk', created: 1, model: 'm' };
/** An event of the given choices, with the usage written as the upstream writes it (exact digits). */
const event = (choices: object[], usage?: string) =>
  `data: ${JSON.stringify({ ...envelope, choices }).slice(0, -1)}${usage ? `,"usage":${usage}` : ''}}`;
const finish = [{ index: 0, delta: { content: '' }, finish_reason: 'stop' }];

/** The whole stream, for a reply of `content` sent in two pieces. */
export function twoFinishStream(content: string): string {
  const half = Math.floor(content.length / 2);
  return [
    ': PROCESSING\r\n\r\n',
    `${event([{ index: 0, delta: { role: 'assistant', content: content.slice(0, half) }, finish_reason: null }])}\r\n\r\n`,
    ': PROCESSING\r\n\r\n',
    `${event([{ index: 0, delta: { content: content.slice(half) }, finish_reason: null }])}\r\n\r\n`,
    `${event(finish)}\n\n`,
    `${event(finish, USAGE)}\n\n`,
    'data: [DONE]\n\n',
  ].join('');
}

/** The same reply as a JSON body. */
export function twoFinishJson(content: string): string {
  const message = { role: 'assistant', content };
  const body = {
    ...envelope,
    object: 'chat.completion',
    choices: [{ index: 0, message, finish_reason: 'stop' }],
  };
  return `${JSON.stringify(body).slice(0, -1)},"usage":${USAGE}}`;
}

/**
 * The stream's bytes cut at awkward places: between the `\r` and `\n` of every CRLF, inside every
 * `PROCESSING` and `data:`, and inside the cost's digits.
 */
export function awkwardPieces(text: string): Buffer[] {
  const bytes = Buffer.from(text);
  const cuts = new Set<number>();
  const every = (needle: string, offset: number) => {
    for (let at = bytes.indexOf(needle); at !== -1; at = bytes.indexOf(needle, at + 1)) cuts.add(at + offset);
  };
  every('\r\n', 1);
  every('PROCESSING', 4);
  every('data:', 2);
  every(TWO_FINISH_COST, 6);
  const sorted = [...cuts].sort((a, b) => a - b);
  return sorted
    .map((cut, i) => bytes.subarray(sorted[i - 1] ?? 0, cut))
    .concat(bytes.subarray(sorted.at(-1)));
}

/** Writes the pieces as separate packets (a pause after each), then ends the response. */
export async function writeInPieces(
  res: ServerResponse,
  pieces: readonly Buffer[],
  gapMs = 5,
): Promise<void> {
  for (const piece of pieces) {
    await new Promise<void>((resolve) => res.write(piece, () => resolve()));
    await new Promise((resolve) => setTimeout(resolve, gapMs));
  }
  res.end();
}
