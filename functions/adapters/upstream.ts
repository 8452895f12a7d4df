import { BadRequestError, UpstreamError } from '../core/errors.js';
import type { UpstreamTarget } from '../core/tiers.js';

/**
 * Calls an OpenAI-compatible upstream. Node's global fetch keeps connections alive across warm
 * invocations through its module-scope dispatcher. Redirects are never followed (OWASP API10), and
 * upstream error text never reaches the client except a 400's message, which is about the caller's input.
 */

export interface UpstreamCall {
  target: UpstreamTarget;
  apiKey: string | undefined;
  /** The request body as the upstream receives it (model already rewritten). */
  body: Record<string, unknown>;
  /** Give up if the response status has not arrived within this many ms. */
  firstByteTimeoutMs: number;
}

export interface OpenedUpstream {
  response: Response;
  /** Aborts the underlying request (used on idle timeouts). */
  abort(): void;
}

export async function openUpstream(call: UpstreamCall): Promise<OpenedUpstream> {
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new Error('upstream first-byte timeout')),
    call.firstByteTimeoutMs,
  );
  let response: Response;
  try {
    response = await fetch(`${call.target.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: call.body.stream ? 'text/event-stream' : 'application/json',
        ...(call.apiKey ? { authorization: `Bearer ${call.apiKey}` } : {}),
      },
      body: JSON.stringify(call.body),
      redirect: 'manual',
      signal: controller.signal,
    });
  } catch (cause) {
    throw new UpstreamError(undefined, { cause });
  } finally {
    clearTimeout(timer);
  }
  if (response.ok) return { response, abort: () => controller.abort(new Error('aborted by gateway')) };
  const message = await readErrorMessage(response);
  if (response.status === 400 && message) {
    throw new BadRequestError(message, null, 'upstream_rejected_request');
  }
  throw new UpstreamError(undefined, { cause: new Error(`upstream answered HTTP ${response.status}`) });
}

/** The `error.message` of an OpenAI-shaped error body, read with a size bound. */
async function readErrorMessage(response: Response): Promise<string | undefined> {
  try {
    const text = (await response.text()).slice(0, 16_384);
    const parsed = JSON.parse(text) as { error?: { message?: unknown } };
    const message = parsed.error?.message;
    return typeof message === 'string' ? message.slice(0, 1_000) : undefined;
  } catch {
    return undefined;
  }
}
