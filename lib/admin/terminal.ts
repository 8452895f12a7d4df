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

/**
 * Every C0 control but tab and the line breaks, DEL, and every C1 control: what a terminal acts on
 * (ESC and CSI start sequences that clear the screen, move the cursor or set the window title; BEL
 * rings).
 */
const CONTROL = /\p{Cc}/gu;
const KEPT = new Set(['\t', '\n', '\r']);

/**
 * What the CLI prints, as it reaches the terminal: every block it writes, on either stream, goes
 * through this (cli.ts, `main`), so a control character in any echoed argument or stored value is
 * shown as a `\x1b`-style escape, never acted on. Values a person reads are escaped whole by
 * terminalSafe first (line breaks included); this is the net under everything else, and leaves the
 * line breaks of multi-line output and of CSV's quoted cells.
 */
export function printable(text: string): string {
  return text.replace(CONTROL, (char) => (KEPT.has(char) ? char : escapeChar(char)));
}

/**
 * What JSON.stringify leaves raw in a string and a terminal may act on: DEL and C1 (it escapes C0
 * itself, so these are the only controls left), and the bidi and line separator characters.
 */
const JSON_UNSAFE = /[\p{Cc}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/gu;

/**
 * JSON text of `value` with no character a terminal acts on: JSON.stringify escapes C0 itself, and
 * the rest are written as `\u` escapes, which a JSON reader reads back as the same string.
 */
export function jsonText(value: unknown): string {
  return JSON.stringify(value).replace(
    JSON_UNSAFE,
    (char) => `\\u${(char.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`,
  );
}

/**
 * Rows as aligned columns, two spaces apart, each as wide as its widest cell (the last not padded).
 * Cells are printed as given: escape what a customer chose (terminalSafe) first.
 */
export function columns(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows)
    row.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, cell.length);
    });
  return rows
    .map((row) =>
      row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  '),
    )
    .join('\n');
}
