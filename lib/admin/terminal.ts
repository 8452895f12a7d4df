/**
 * Text for the operator's terminal. Customers choose some strings the tables print (the request's
 * `user`); a control character in one could forge a row (LF), overwrite a name (CR), clear the screen
 * or set the window title (ESC and C1 sequences), or reorder what is shown (Unicode bidi overrides and
 * isolates). Each such character is printed as a visible escape, as are backslashes, so the escaped
 * form of a control and the same text typed out stay apart.
 */
const UNSAFE = /[\\\p{Cc}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/gu;
const NAMED: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function escapeChar(char: string): string {
  const named = Object.hasOwn(NAMED, char) ? NAMED[char] : undefined;
  if (named) return named;
  const code = char.codePointAt(0) ?? 0;
  return code <= 0xff
    ? `\\x${code.toString(16).padStart(2, '0')}`
    : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** `text` with every control, bidi and line-separator character (and `\`) written as an escape. */
export function terminalSafe(text: string): string {
  return text.replace(UNSAFE, escapeChar);
}
