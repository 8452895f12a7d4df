/**
 * A prompt longer than its tier's context length is refused before any upstream call, as OpenAI
 * refuses it (400 `context_length_exceeded`, in its words), and nothing is billed. Counted as the
 * gateway estimates a prompt (core/tokens.ts), the output asked for (`max_completion_tokens` or
 * `max_tokens`) included as OpenAI counts it: only when given.
 *
 * Counting costs CPU, so most requests are not counted: a token is at least one UTF-8 byte of the text
 * it stands for, and the body holds every message's text and more than each message's 3 tokens of
 * overhead, so a body of B bytes has at most B + 3 prompt tokens. A body that small is let through on
 * that comparison; a larger one is counted, and counting stops once the context length is passed or
 * after CONTEXT_COUNT_MS (the rest estimated at the rate counted).
 */
import { BadRequestError } from './errors.js';
import type { ChatRequest } from './schemas.js';
import { CountBudget, estimatePromptTokens } from './tokens.js';

/**
 * The most time the count may take: past it, the rest is estimated at the rate counted, so that a
 * large prompt at a small CPU share (160 MB: 9% of a vCPU, about 450 ms of CPU in these 5 s) never
 * spends the time its upstream call needs.
 */
const CONTEXT_COUNT_MS = 5_000;

/** estimatePromptTokens's own tokens besides the messages' (the reply primer). */
const PRIMER_TOKENS = 3;

/** Whether a body of `bodyBytes` could hold a prompt that, with `output` tokens, passes `contextLength`. */
export function mayExceedContext(bodyBytes: number, output: number, contextLength: number): boolean {
  return bodyBytes + PRIMER_TOKENS + output > contextLength;
}

/** Throws OpenAI's 400 when the prompt (and the output asked for) passes the context length. */
export async function refuseOverContext(
  request: Pick<ChatRequest, 'messages' | 'max_tokens' | 'max_completion_tokens'>,
  bodyBytes: number,
  contextLength: number,
  deadline: number,
): Promise<void> {
  const output = request.max_completion_tokens ?? request.max_tokens ?? 0;
  if (!mayExceedContext(bodyBytes, output, contextLength)) return;
  const budget = new CountBudget(Math.min(deadline, Date.now() + CONTEXT_COUNT_MS), Date.now, contextLength);
  const prompt = await estimatePromptTokens(request.messages, budget);
  if (prompt + output <= contextLength) return;
  throw new BadRequestError(
    output > 0
      ? `This model's maximum context length is ${contextLength} tokens. However, you requested ${prompt + output} tokens (${prompt} in the messages, ${output} in the completion). Please reduce the length of the messages or completion.`
      : `This model's maximum context length is ${contextLength} tokens. However, your messages resulted in ${prompt} tokens. Please reduce the length of the messages.`,
    'messages',
    'context_length_exceeded',
  );
}
