import { describe, expect, it } from 'vitest';
import { parseCommandLine, runCommand } from '../../../lib/admin/cli.js';
import { keyFor } from '../../support/fixtures.js';
import { MemoryStore } from '../../support/memory-store.js';
import { accountWithUsers } from '../../support/usage-by-user.js';

/**
 * `user` strings a customer sends to forge rows, move the cursor or rewrite the operator's terminal
 * when the table output is printed: LF, CR, ESC sequences (clear screen, set the title, a cursor move),
 * C1 controls (CSI as one byte), DEL, and Unicode bidi overrides and isolates.
 */
const HOSTILE = [
  'alice\nmallory                       999 requests  0+0 tokens  $0',
  'bob\rmallory',
  'crlf\r\nrow',
  '\x1b[2J\x1b[H',
  '\x1b]0;pwned\x07',
  'up\x1b[1A\x1b[2K',
  'c1\x9b31mred',
  'nel\x85line',
  'del\x7f\x7f',
  'bell\x07tab\tnul\x00',
  'rlo\u202Eevil\u202C',
  'isolate\u2066x\u2069',
  'marks\u200E\u200F\u061C',
  'separators\u2028\u2029',
];
/** Characters that must never reach a terminal from a customer's string. */
const CONTROL = /[\p{Cc}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/u;

describe('admin table output', () => {
  it('usage --by user: one line per user, no control character printed, each name readable', async () => {
    const result = await runCommand(
      await accountWithUsers(HOSTILE),
      parseCommandLine(['usage', 'acct', '--by', 'user']),
    );
    const lines = result.text.split('\n');
    expect(lines).toHaveLength(HOSTILE.length);
    for (const line of lines) {
      expect(line).not.toMatch(CONTROL);
      expect(line).toMatch(/ {2}\s*1 requests {2}10\+5 tokens {2}\$0\.000013$/);
    }
    expect(result.text).toContain('alice\\nmallory');
    expect(result.text).toContain('bob\\rmallory');
    expect(result.text).toContain('\\x1b[2J\\x1b[H');
    expect(result.text).toContain('rlo\\u202eevil\\u202c');
    expect(result.text).toContain('c1\\x9b31mred');
  });

  it('escapes a backslash too, so an escaped control and its spelled-out text stay apart', async () => {
    const result = await runCommand(
      await accountWithUsers(['a\nb', 'a\\nb']),
      parseCommandLine(['usage', 'acct', '--by', 'user']),
    );
    const names = result.text.split('\n').map((line) => line.split(/ {2,}/)[0]);
    expect(names.sort()).toEqual(['a\\\\nb', 'a\\nb']);
  });

  it('key create refuses a hostile key name; key list prints one made before the rule escaped', async () => {
    const store = new MemoryStore();
    await store.createAccount('acct', 0n, new Date().toISOString());
    const ctx = { store: store as never };
    for (const name of ['ci\x1b[2J\nforged', 'c1\x9b31m', 'nel\x85line', 'rtl\u202eevil'])
      await expect(
        runCommand(ctx, parseCommandLine(['key', 'create', 'acct', '--name', name])),
      ).rejects.toThrow('A key name may not contain control characters');
    expect(await store.listKeys('acct')).toEqual([]);
    await keyFor(store, 'acct', 'ci\x1b[2J\nforged');
    const listed = await runCommand(ctx, parseCommandLine(['key', 'list', 'acct']));
    const lines = listed.text.split('\n');
    expect(lines).toHaveLength(2); // the header and the key
    for (const line of lines) expect(line).not.toMatch(CONTROL);
    expect(listed.text).toContain('ci\\x1b[2J\\nforged');
  });

  it('the --json and csv outputs keep the strings as they are (their own escaping applies)', async () => {
    const result = await runCommand(
      await accountWithUsers(HOSTILE),
      parseCommandLine(['usage', 'acct', '--by', 'user', '--json']),
    );
    const groups = (result.json as { groups: { user: string }[] }).groups;
    expect(groups.map((g) => g.user).sort()).toEqual([...HOSTILE].sort());
  });
});
