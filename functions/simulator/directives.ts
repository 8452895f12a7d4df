/**
 * The simulator's controls: `[[sim:name]]` or `[[sim:name=N]]` anywhere in the last user message.
 *
 * | directive                 | effect                                                                |
 * | ------------------------- | --------------------------------------------------------------------- |
 * | `tokens=N`                | the reply is N completion tokens long                                  |
 * | `cached=N`                | N prompt tokens reported as cached                                     |
 * | `delay_ms=N`              | N ms between streamed chunks (before a JSON body)                      |
 * | `first_byte_delay_ms=N`   | N ms before the status line and headers                                |
 * | `error=N`                 | answers HTTP status N with an OpenAI-shaped error                      |
 * | `cut_after=N`             | the connection drops after N chunks (a JSON body: halfway through)    |
 * | `malformed_after=N`       | a stream sends a malformed chunk after N chunks                        |
 * | `pause_after=N`, `pause_ms=M` | before chunk N, a pause of M ms instead of `delay_ms`             |
 * | `run_on=N`                | N extra content chunks past the reply, without usage                   |
 * | `no_usage`                | no usage reported                                                      |
 * | `usage_on_last_chunk`     | usage on the last content chunk instead of a usage-only chunk          |
 */
export interface Directives {
  tokens?: number;
  cached?: number;
  delayMs?: number;
  firstByteDelayMs?: number;
  error?: number;
  cutAfter?: number;
  malformedAfter?: number;
  /** Before event N (0-based), wait `pauseMs` instead of `delayMs`: a mid-stream pause. */
  pauseAfter?: number;
  pauseMs?: number;
  /** Stream this many extra content chunks past the reply, without usage: an upstream that runs on. */
  runOn?: number;
  noUsage: boolean;
  usageOnLastChunk: boolean;
}

const DIRECTIVE = /\[\[sim:([a-z_]+)(?:=(\d+))?\]\]/g;

export function parseDirectives(text: string): Directives {
  const found: Directives = { noUsage: false, usageOnLastChunk: false };
  for (const [, name, raw] of text.matchAll(DIRECTIVE)) {
    const value = raw === undefined ? undefined : Number(raw);
    if (name === 'no_usage') found.noUsage = true;
    else if (name === 'usage_on_last_chunk') found.usageOnLastChunk = true;
    else if (value !== undefined) {
      if (name === 'tokens') found.tokens = value;
      else if (name === 'cached') found.cached = value;
      else if (name === 'delay_ms') found.delayMs = value;
      else if (name === 'first_byte_delay_ms') found.firstByteDelayMs = value;
      else if (name === 'error') found.error = value;
      else if (name === 'cut_after') found.cutAfter = value;
      else if (name === 'malformed_after') found.malformedAfter = value;
      else if (name === 'pause_after') found.pauseAfter = value;
      else if (name === 'pause_ms') found.pauseMs = value;
      else if (name === 'run_on') found.runOn = value;
    }
  }
  return found;
}
