import type { ChatCompletion } from 'openai/resources/chat/completions';
import { BodyDeadlineError, readBody } from '../adapters/upstream.js';
import type { UpstreamBody } from '../adapters/upstream-body.js';
import type { Bill, Delivered } from '../billing/bill.js';
import { GatewayTimeoutError, UpstreamError } from '../core/errors.js';
import { nanoToUsd } from '../core/money.js';
import { cutMessage, outputByteBound, parseCompletionBody, textOf } from '../core/upstream-reply.js';
import { usageForClient } from '../core/usage.js';
import type { Deadlines } from './deadlines.js';

export interface JsonReplyOptions {
  body: UpstreamBody;
  abort: () => void;
  /** Our id, creation time and tier for the reply. */
  envelope: { id: string; created: number; model: string };
  /** The request's output cap in tokens: text beyond its bound is cut, as a stream's is. */
  outputCap: number;
  deadlines: Deadlines;
}

/** A JSON reply read: what it delivers, for the bill, and the reply itself once billed. */
export interface JsonReply {
  delivered: Delivered;
  /** The reply in OpenAI's shape with our envelope, carrying the bill's usage and cost. */
  reply(bill: Pick<Bill, 'usage' | 'billedNano'>): ChatCompletion;
}

/**
 * A JSON reply (the JSON counterpart of relay.ts): the upstream's body read before the deadline and
 * parsed once (core/upstream-reply.ts), held to the same output bound as a stream (cut, with a length
 * finish, billed on what is sent), and rebuilt in OpenAI's shape with our envelope once billed.
 */
export async function readJsonReply(options: JsonReplyOptions): Promise<JsonReply> {
  const { deadlines } = options;
  let text: string;
  try {
    text = await readBody(options.body, deadlines.upstream);
  } catch (cause) {
    options.abort();
    if (cause instanceof BodyDeadlineError)
      throw new GatewayTimeoutError(deadlines.jsonReplySeconds, { cause });
    throw new UpstreamError(undefined, { cause });
  }
  const parsed = parseCompletionBody(text);
  if (!parsed.ok) throw new UpstreamError(undefined, { cause: new Error(`upstream body: ${parsed.reason}`) });
  const bound = outputByteBound(options.outputCap);
  let cut = false;
  const choices = parsed.completion.choices.map((choice) => {
    if (Buffer.byteLength(textOf(choice.message)) <= bound) return choice;
    cut = true;
    return { ...choice, message: cutMessage(choice.message, bound), finish_reason: 'length' as const };
  });
  const delivered: Delivered = {
    report: parsed.usage,
    text: choices.map((choice) => textOf(choice.message)).join(''),
    notes: cut ? ['reply cut at the output cap'] : [],
    finishReason: cut ? 'length' : choices[0]?.finish_reason.slice(0, 32),
    cut,
  };
  const { system_fingerprint, service_tier } = parsed.completion;
  const reply = ({ usage, billedNano }: Pick<Bill, 'usage' | 'billedNano'>): ChatCompletion => ({
    ...options.envelope,
    object: 'chat.completion',
    choices: choices as ChatCompletion['choices'],
    // `cost` is our extra field, a JsonDecimal that serialises as a bare JSON number.
    usage: usageForClient(usage, nanoToUsd(billedNano)) as ChatCompletion['usage'] & {},
    ...(system_fingerprint !== undefined ? { system_fingerprint } : {}),
    ...(service_tier !== undefined ? { service_tier } : {}),
  });
  return { delivered, reply };
}
