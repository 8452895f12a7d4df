/**
 * CSV for exports (the operator's, and the customer's monthly statement), through csv-stringify,
 * quoting commas, quotes and line breaks as RFC 4180 says. csv-stringify on its own quotes only its
 * record delimiter (LF), so a lone CR is matched too: Python's csv module and spreadsheets break rows
 * on it. A customer chooses some cells (the request's `user`, a key's name): one starting with `=`,
 * `+`, `-`, `@`, a tab or a carriage return would open as a formula in a spreadsheet, so such a cell
 * is prefixed with `'` (OWASP's CSV-injection rule). A plain decimal number (a negative amount) is
 * left as it is.
 */
import { stringify } from 'csv-stringify/sync';

const FORMULA_START = /^[=+\-@\t\r]/;
const PLAIN_NUMBER = /^-?\d+(\.\d+)?$/;

/** One cell as written: formula-looking text neutralised, everything else as its string. */
export function csvCell(value: unknown): string {
  const text = value === undefined || value === null ? '' : String(value);
  return FORMULA_START.test(text) && !PLAIN_NUMBER.test(text) ? `'${text}` : text;
}

/** A header row and one row per record, the given columns in order. */
export function toCsv<Row extends Record<string, unknown>>(
  columns: readonly string[],
  rows: readonly Row[],
): string {
  return stringify(
    rows.map((row) => columns.map((column) => csvCell(row[column]))),
    { header: true, columns: [...columns], record_delimiter: '\n', quoted_match: /[\r\n]/ },
  ).replace(/\n$/, '');
}
