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

function loadCounter(): Promise<Encoder> {
  counter ??= import('gpt-tokenizer').then(
    (module) => (text: string) => module.countTokens(text, SPECIAL_TOKENS_AS_TEXT),
  );
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

export function textOfContent(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part: unknown) => {
      const p = part as { text?: unknown; refusal?: unknown };
      return typeof p.text === 'string' ? p.text : typeof p.refusal === 'string' ? p.refusal : '';
    })
    .join('');
}

export async function estimatePromptTokens(messages: readonly MessageLike[]): Promise<number> {
  const countTokens = await loadCounter();
  let total = REPLY_PRIMER;
  for (const message of messages) {
    total += PER_MESSAGE + countTokens(textOfContent(message.content));
    for (const call of message.tool_calls ?? [])
      total += countTokens(
        call.function
          ? call.function.name + call.function.arguments
          : `${call.custom?.name ?? ''}${call.custom?.input ?? ''}`,
      );
  }
  return total;
}

export async function estimateTextTokens(text: string): Promise<number> {
  if (text === '') return 0;
  const countTokens = await loadCounter();
  return countTokens(text);
}
