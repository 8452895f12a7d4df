/**
 * Cutting strings that came from outside (a client's `user`, a field name, an upstream's text) without
 * breaking a character: a cut inside a surrogate pair leaves a lone surrogate, which
 * `encodeURIComponent` throws on and a header or a UTF-8 store cannot carry.
 */

/** `s` with lone surrogates replaced by U+FFFD, then cut to at most `maxUnits` UTF-16 units on a code point boundary. */
export function cutToCodePoints(s: string, maxUnits: number): string {
  const well = s.toWellFormed();
  if (well.length <= maxUnits) return well;
  // A high surrogate as the last unit kept would be cut from its pair: stop before it.
  const last = well.charCodeAt(maxUnits - 1);
  return well.slice(0, last >= 0xd800 && last <= 0xdbff ? maxUnits - 1 : maxUnits);
}

/** `s` cut to at most `maxBytes` UTF-8 bytes, on a code point boundary. */
export function cutToBytes(s: string, maxBytes: number): string {
  if (Buffer.byteLength(s) <= maxBytes) return s;
  let bytes = 0;
  let end = 0;
  for (const ch of s) {
    const size = Buffer.byteLength(ch);
    if (bytes + size > maxBytes) break;
    bytes += size;
    end += ch.length;
  }
  return s.slice(0, end);
}

/**
 * Orders two strings as DynamoDB orders a sort key (by their bytes; for the ASCII of ids, by code unit),
 * not as `localeCompare` does (which puts "0b" before "0V"): a list merged from several queries keeps
 * the order, and the cursor, of the queries themselves.
 */
export function byBytes(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
