/**
 * What an upstream receives. The client's fields go through as they came (the gateway validated the
 * ones it depends on), with three changes: the tier becomes the target's own model id; a stream
 * always asks for usage (`stream_options.include_usage`), a JSON request sends no stream_options; and
 * what OpenAI's SDKs echo back from a reply but no API accepts is removed (`tool_calls[].index`,
 * `parsed`).
 *
 * Fields outside OpenAI's request schema (OpenRouter's `provider` and `transforms`, vLLM's `top_k`,
 * `min_p`, `repetition_penalty`; `reasoning`, `reasoning_details` and `annotations` on assistant
 * messages; `cache_control` on content parts) follow the target's `extraFields` setting: `forward`
 * (the default: OpenRouter, vLLM, llama.cpp and LiteLLM take them) or `drop` (OpenAI itself refuses
 * unknown arguments); dropped names are reported to the client in the `x-dropped-fields` header
 * (percent-encoded where a name is not printable ASCII, so any JSON key makes a valid header value).
 */
import { type ChatRequest, KNOWN_REQUEST_FIELDS } from './schemas.js';
import { cutToCodePoints } from './strings.js';
import type { UpstreamTarget } from './tiers.js';

/**
 * OpenAI's own message fields, by role; anything else on a message is extra. Maps, not objects: a
 * client's role or part type looked up in an object finds Object.prototype's members (`constructor`).
 */
const MESSAGE_FIELDS = new Map<string, ReadonlySet<string>>([
  ['system', new Set(['role', 'content', 'name'])],
  ['developer', new Set(['role', 'content', 'name'])],
  ['user', new Set(['role', 'content', 'name'])],
  ['assistant', new Set(['role', 'content', 'refusal', 'tool_calls', 'function_call', 'audio', 'name'])],
  ['tool', new Set(['role', 'content', 'tool_call_id'])],
  ['function', new Set(['role', 'content', 'name'])],
]);
/** OpenAI's own content-part fields, by part type. */
const PART_FIELDS = new Map<string, ReadonlySet<string>>([
  ['text', new Set(['type', 'text'])],
  ['refusal', new Set(['type', 'refusal'])],
  ['image_url', new Set(['type', 'image_url'])],
  ['input_audio', new Set(['type', 'input_audio'])],
  ['file', new Set(['type', 'file'])],
]);
/** Echoed from replies, accepted by no API. */
const NEVER_FORWARDED_MESSAGE_FIELDS = new Set(['parsed']);

/**
 * A field name as it can appear in a header value: printable ASCII as is, anything else percent-encoded.
 * A client's name is cut on a code point and any lone surrogate replaced first: `encodeURIComponent`
 * throws on a lone surrogate, which made a 502 of a client's own string.
 */
function headerSafe(name: string): string {
  const short = name.length > 64 ? `${cutToCodePoints(name, 64)}...` : name.toWellFormed();
  return /^[\x21-\x2b\x2d-\x7e]+$/.test(short) ? short : encodeURIComponent(short);
}

export interface ForwardedBody {
  body: Record<string, unknown>;
  /** Extra field names not sent to this target (`provider`, `messages[].reasoning`, ...). */
  dropped: string[];
}

export function toUpstreamBody(
  request: ChatRequest,
  target: Pick<UpstreamTarget, 'model' | 'extraFields'>,
): ForwardedBody {
  const drop = target.extraFields === 'drop';
  const dropped = new Set<string>();
  const body: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(request)) {
    // `__proto__` would set the body's prototype rather than send a field: never forwarded.
    if (key === '__proto__' || (drop && !KNOWN_REQUEST_FIELDS.has(key))) dropped.add(headerSafe(key));
    else body[key] = value;
  }
  body.model = target.model;
  if (request.stream) body.stream_options = { ...(request.stream_options ?? {}), include_usage: true };
  else delete body.stream_options;
  body.messages = request.messages.map((message) => {
    const allowed = MESSAGE_FIELDS.get(message.role);
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(message)) {
      if (NEVER_FORWARDED_MESSAGE_FIELDS.has(key)) continue;
      // As at the top level: `__proto__` would set the message's prototype, not send a field.
      if (key === '__proto__' || (drop && allowed && !allowed.has(key))) {
        dropped.add(`messages[].${headerSafe(key)}`);
        continue;
      }
      out[key] = value;
    }
    if (Array.isArray(out.tool_calls))
      out.tool_calls = (out.tool_calls as Record<string, unknown>[]).map(
        ({ index: _index, ...call }) => call,
      );
    if (drop && Array.isArray(out.content))
      out.content = (out.content as Record<string, unknown>[]).map((part) => {
        const fields = PART_FIELDS.get(String(part.type));
        if (!fields) return part;
        const kept: Record<string, unknown> = {};
        for (const [key, value] of Object.entries(part)) {
          if (fields.has(key) && key !== '__proto__') kept[key] = value;
          else dropped.add(`messages[].content[].${headerSafe(key)}`);
        }
        return kept;
      });
    return out;
  });
  return { body, dropped: [...dropped].sort() };
}
