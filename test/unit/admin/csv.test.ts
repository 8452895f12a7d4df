import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { parseCommandLine, runCommand } from '../../../lib/admin/cli.js';
import { csvCell, toCsv } from '../../../lib/admin/csv.js';
import { accountWithUsers } from '../../support/usage-by-user.js';

/** `user` strings a customer might send to forge rows or formulas in an operator's export. */
const HOSTILE = [
  'alice,bob',
  'say "hi"',
  'two\nlines',
  'crlf\r\nrow',
  'lone\rcr',
  '=HYPERLINK("http://x","click")',
  '+1',
  '-2+3',
  '@SUM(A1)',
  '\tleading tab',
  '\rleading cr',
  'emoji 😀 and \ud83d lone',
  'x'.repeat(10_240),
];
/** What the export holds for a cell: formulas neutralised; text as UTF-8 carries it (a lone surrogate is U+FFFD). */
const neutralised = (text: string) => {
  const well = text.toWellFormed();
  return /^[=+\-@\t\r]/.test(well) ? `'${well}` : well;
};

/** Row breaks as Python's csv module and spreadsheets read them: CRLF, LF, and a lone CR. */
const BREAKS_ON_CR = ['\r\n', '\n', '\r'];

describe('toCsv', () => {
  it('round-trips hostile cells through a CSV parser: same rows, same cells, formulas neutralised', () => {
    const rows = HOSTILE.map((user, i) => ({ user, requests: i, costUsd: '-0.000012' }));
    const parsed = parse(toCsv(['user', 'requests', 'costUsd'], rows), { relax_quotes: false }) as string[][];
    expect(parsed).toHaveLength(HOSTILE.length + 1);
    expect(parsed[0]).toEqual(['user', 'requests', 'costUsd']);
    parsed.slice(1).forEach((row, i) => {
      expect(row).toEqual([neutralised(HOSTILE[i] ?? ''), String(i), '-0.000012']);
    });
  });

  it('quotes every cell holding a CR or an LF: a parser that also breaks rows on a lone CR (Python, spreadsheets) reads the same rows', () => {
    const rows = HOSTILE.map((user, i) => ({ user, requests: i, costUsd: '-0.000012' }));
    const csv = toCsv(['user', 'requests', 'costUsd'], rows);
    const parsed = parse(csv, { record_delimiter: BREAKS_ON_CR, relax_quotes: false }) as string[][];
    expect(parsed).toHaveLength(HOSTILE.length + 1);
    parsed.slice(1).forEach((row, i) => {
      expect(row).toEqual([neutralised(HOSTILE[i] ?? ''), String(i), '-0.000012']);
    });
    expect(toCsv(['user'], [{ user: 'cr\ronly' }])).toBe('user\n"cr\ronly"');
  });

  it('leaves plain numbers, negative amounts included, as numbers', () => {
    expect(csvCell('-0.000012')).toBe('-0.000012');
    expect(csvCell(-3)).toBe('-3');
    expect(csvCell('-3e5')).toBe("'-3e5");
    expect(csvCell('=1+1')).toBe("'=1+1");
  });
});

describe('admin usage exports', () => {
  /** The account holds one charge per hostile user string, cut to the 256 characters a request may send. */
  const withHostileUsers = () => accountWithUsers(HOSTILE.map((user) => user.slice(0, 256)));

  it('--by user --format csv: one row per user, whatever the user strings hold', async () => {
    const ctx = await withHostileUsers();
    const result = await runCommand(
      ctx,
      parseCommandLine(['usage', 'acct', '--by', 'user', '--format', 'csv']),
    );
    const parsed = parse(result.text) as string[][];
    expect(parsed[0]).toEqual(['user', 'requests', 'promptTokens', 'completionTokens', 'costUsd']);
    expect(parsed).toHaveLength(HOSTILE.length + 1);
    const users = parsed.slice(1).map((row) => row[0]);
    expect(users.sort()).toEqual(HOSTILE.map((u) => neutralised(u.slice(0, 256))).sort());
  });

  it('--format csv (the ledger): one row per entry, carriage returns and formulas included', async () => {
    const ctx = await withHostileUsers();
    const result = await runCommand(ctx, parseCommandLine(['usage', 'acct', '--format', 'csv']));
    const parsed = parse(result.text, { columns: true }) as Record<string, string>[];
    const charges = parsed.filter((row) => row.type === 'charge');
    expect(charges.map((row) => row.user)).toEqual(HOSTILE.map((u) => neutralised(u.slice(0, 256))));
    expect(charges.every((row) => row.amountUsd === '-0.000013')).toBe(true);
  });

  it('the ledger and --by user exports keep their row count for a parser that breaks rows on CR', async () => {
    const ctx = await withHostileUsers();
    const ledger = await runCommand(ctx, parseCommandLine(['usage', 'acct', '--format', 'csv']));
    const entries = parse(ledger.text, { columns: true, record_delimiter: BREAKS_ON_CR }) as Record<
      string,
      string
    >[];
    expect(entries).toHaveLength(HOSTILE.length + 1); // the initial top-up and one charge per user
    expect(entries.filter((row) => row.type === 'charge').map((row) => row.user)).toEqual(
      HOSTILE.map((u) => neutralised(u.slice(0, 256))),
    );
    const byUser = await runCommand(
      ctx,
      parseCommandLine(['usage', 'acct', '--by', 'user', '--format', 'csv']),
    );
    expect(parse(byUser.text, { record_delimiter: BREAKS_ON_CR })).toHaveLength(HOSTILE.length + 1);
  });
});
