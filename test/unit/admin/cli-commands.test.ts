import { describe, expect, it } from 'vitest';
import { parseCommandLine, runCommand } from '../../../lib/admin/cli.js';
import { columns, jsonText, printable } from '../../../lib/admin/terminal.js';
import { chargeEntry } from '../../support/fixtures.js';
import { MemoryStore } from '../../support/memory-store.js';

/** $12,345,678.123456789: more significant digits than a JavaScript number keeps. */
const LARGE_NANO = 12_345_678_123_456_789n;
const LARGE_USD = '12345678.123456789';

async function storeWith(accountId: string, nano: bigint) {
  const store = new MemoryStore();
  await store.createAccount(accountId, nano, '2026-01-01T00:00:00.000Z');
  return store;
}
const run = (store: MemoryStore, ...argv: string[]) =>
  runCommand({ store: store as never }, parseCommandLine(argv));
/** Every amount a JSON result holds, wherever it is. */
const amounts = (value: unknown): unknown[] =>
  Array.isArray(value)
    ? value.flatMap(amounts)
    : value && typeof value === 'object'
      ? Object.entries(value).flatMap(([k, v]) =>
          /^(creditBalance|held|holds|amount|amountUsd|ledgerBalance|difference|costUsd)$/.test(k) &&
          typeof v !== 'object'
            ? [v]
            : amounts(v),
        )
      : [];

describe('money leaves the CLI exact', () => {
  it('account show: text and JSON carry $12345678.123456789 to the nano, JSON as a string', async () => {
    const store = await storeWith('rich', LARGE_NANO);
    const shown = await run(store, 'account', 'show', 'rich');
    expect(shown.text).toBe(`rich  status=active  creditBalance=$${LARGE_USD}  held=$0  slices=1`);
    expect(shown.json).toEqual({
      accountId: 'rich',
      status: 'active',
      creditBalance: LARGE_USD,
      held: '0',
      slices: 1,
    });
  });

  it('reconcile, usage (json and --by) and holds: every amount a string, exact', async () => {
    const store = await storeWith('rich', LARGE_NANO);
    await store.settleCharge(chargeEntry('rich', 'key_1', 1n, { generationId: 'gen-1767225600-A1' }));
    await store.placeHold({
      accountId: 'rich',
      holdId: 'gen-1767225600-H1',
      amountNano: 1_000_000_000_000_001n,
      expiresAt: Date.now() + 60_000,
      createdAt: new Date().toISOString(),
    });
    const reconciled = await run(store, 'reconcile', 'rich', '--json');
    expect(reconciled.json).toMatchObject({
      results: [
        {
          creditBalance: '12345678.123456788',
          ledgerBalance: '12345678.123456788',
          difference: '0',
          held: '1000000.000000001',
          holds: '1000000.000000001',
        },
      ],
    });
    const usage = await run(store, 'usage', 'rich', '--format', 'json');
    expect(JSON.parse(usage.text).entries.map((e: { amountUsd: unknown }) => e.amountUsd)).toEqual([
      LARGE_USD,
      '-0.000000001',
    ]);
    const byDay = await run(store, 'usage', 'rich', '--by', 'day', '--json');
    const holds = await run(store, 'holds', 'rich', '--json');
    expect(holds.json).toMatchObject({
      holds: [{ amountUsd: '1000000.000000001' }],
    });
    for (const result of [reconciled, usage, byDay, holds]) {
      const found = amounts(result.json);
      expect(found.length).toBeGreaterThan(0);
      for (const amount of found) expect(typeof amount).toBe('string');
    }
  });

  it('a top-up above $1,000,000 (or a run of digits) is refused before anything is written', async () => {
    const store = await storeWith('payer', 0n);
    for (const amount of [
      '9999999999999999999999999999',
      '1000000.000000001',
      '1000001',
      `1${'0'.repeat(70)}`,
    ]) {
      await expect(
        run(store, 'credits', 'add', 'payer', amount, '--ref', `r-${amount.length}`),
      ).rejects.toThrow(/above the maximum of \$1000000 a command/);
      await expect(run(store, 'credits', 'remove', 'payer', amount, '--ref', 'x')).rejects.toThrow(/maximum/);
      await expect(run(store, 'account', 'create', `a${amount.length}`, '--credits', amount)).rejects.toThrow(
        /maximum/,
      );
    }
    expect(store.ledger.get('payer') ?? []).toEqual([]);
    expect([...store.accounts.keys()]).toEqual(['payer']);
    const added = await run(store, 'credits', 'add', 'payer', '1000000', '--ref', 'big');
    expect(added.text).toBe('added $1000000 to payer (ref big); creditBalance=$1000000');
    expect(added.json).toMatchObject({ applied: true, amount: '1000000', creditBalance: '1000000' });
  });
});

describe('the CLI says what the README says', () => {
  it('key list: a header, then id, name, prefix, status and created in aligned columns', async () => {
    const store = await storeWith('keyed', 0n);
    await run(store, 'key', 'create', 'keyed', '--name', 'ci');
    await run(store, 'key', 'create', 'keyed', '--name', 'a longer name');
    const [header, ...rows] = (await run(store, 'key', 'list', 'keyed')).text.split('\n');
    expect(header?.split(/ {2,}/)).toEqual(['id', 'name', 'prefix', 'status', 'created']);
    expect(rows).toHaveLength(2);
    for (const row of rows) {
      const [id, name, prefix, status, created] = row.split(/ {2,}/);
      expect(id).toMatch(/^key_[0-9a-f]{16}$/);
      expect(['ci', 'a longer name']).toContain(name);
      expect(prefix).toMatch(/^svc_live_/);
      expect(status).toBe('active');
      expect(Number.isNaN(Date.parse(created ?? ''))).toBe(false);
      expect(row.indexOf(prefix ?? '')).toBe(header?.indexOf('prefix'));
    }
  });

  it('account split to fewer slices than it has is refused; the same count is a no-op', async () => {
    const store = await storeWith('busy', 16n);
    await run(store, 'account', 'split', 'busy', '--slices', '16');
    await expect(run(store, 'account', 'split', 'busy', '--slices', '4')).rejects.toThrow(
      'account busy has 16 slices and slices never decrease: not split into 4',
    );
    expect(store.accounts.get('busy')?.slices).toBe(16);
    expect((await run(store, 'account', 'split', 'busy', '--slices', '16')).text).toMatch(
      /^account busy already has 16 slices/,
    );
    expect((await run(store, 'account', 'show', 'busy')).text).toContain('slices=16');
  });

  it('usage --by key names each key beside its id (text, JSON and CSV)', async () => {
    const store = await storeWith('named', 1_000_000n);
    const ctx = { store: store as never };
    const created = await runCommand(
      ctx,
      parseCommandLine(['key', 'create', 'named', '--name', 'ci runner']),
    );
    const keyId = String(created.json.keyId);
    await store.settleCharge(chargeEntry('named', keyId, 5n, { generationId: 'gen-1767225600-N1' }));
    await store.settleCharge(chargeEntry('named', 'key_gone', 7n, { generationId: 'gen-1767225600-N2' }));
    const text = (await run(store, 'usage', 'named', '--by', 'key')).text.split('\n');
    expect(text.find((line) => line.startsWith(keyId))).toMatch(
      new RegExp(`^${keyId} {2}ci runner +1 requests`),
    );
    expect(text.find((line) => line.startsWith('key_gone'))).toContain('(no such key)');
    const json = (await run(store, 'usage', 'named', '--by', 'key', '--json')).json as {
      groups: { key: string; name: string | null }[];
    };
    expect(json.groups.map((g) => [g.key, g.name])).toEqual([
      [keyId, 'ci runner'],
      ['key_gone', null],
    ]);
    const csv = (await run(store, 'usage', 'named', '--by', 'key', '--format', 'csv')).text.split('\n');
    expect(csv[0]).toBe('key,name,requests,promptTokens,completionTokens,costUsd');
  });

  it('usage --format json: a field that does not apply to an entry is null, never ""', async () => {
    const store = await storeWith('mixed', 1_000_000n);
    await store.settleCharge(chargeEntry('mixed', 'key_1', 5n, { generationId: 'gen-1767225600-M1' }));
    const { entries } = JSON.parse((await run(store, 'usage', 'mixed', '--format', 'json')).text) as {
      entries: Record<string, unknown>[];
    };
    const [topUp, charge] = entries;
    expect(topUp).toMatchObject({
      type: 'topup',
      tier: null,
      keyId: null,
      user: null,
      promptTokens: null,
      completionTokens: null,
      cachedTokens: null,
      estimated: null,
      reference: 'initial-credits',
    });
    expect(charge).toMatchObject({ type: 'charge', keyId: 'key_1', estimated: false, reference: null });
    expect(entries.flatMap((entry) => Object.values(entry))).not.toContain('');
  });

  it('a key created on a suspended account is created, with a warning that it is refused until reinstated', async () => {
    const store = await storeWith('paused', 0n);
    await run(store, 'account', 'suspend', 'paused');
    const created = await run(store, 'key', 'create', 'paused', '--name', 'early');
    expect(created.json).toMatchObject({ accountId: 'paused', accountStatus: 'suspended' });
    expect(created.warnings).toEqual([
      'account paused is suspended: this key is refused (403) until the account is reinstated',
    ]);
    expect(store.keys.size).toBe(1);
    await run(store, 'account', 'reinstate', 'paused');
    expect((await run(store, 'key', 'create', 'paused', '--name', 'later')).warnings).toBeUndefined();
  });

  it('account list: pages of --limit accounts, each page naming the next, until none is left', async () => {
    const store = new MemoryStore();
    for (const id of ['a1', 'a2', 'a3', 'a4', 'a5'])
      await store.createAccount(id, 1_000_000_000n, '2026-01-01T00:00:00.000Z');
    const first = await run(store, 'account', 'list', '--limit', '2');
    expect(first.text.split('\n')).toEqual([
      expect.stringMatching(/^accountId +status +creditBalance +held +slices +created$/),
      expect.stringMatching(/^a1 +active +\$1 +\$0 +1 +2026-01-01T00:00:00.000Z$/),
      expect.stringMatching(/^a2 /),
      'more: account list --after a2 --limit 2',
    ]);
    const seen: string[] = [];
    let after: string | undefined;
    do {
      const page = (await run(store, 'account', 'list', '--limit', '2', ...(after ? ['--after', after] : [])))
        .json as { accounts: { accountId: string; creditBalance: string }[]; next: string | null };
      seen.push(...page.accounts.map((a) => a.accountId));
      expect(page.accounts.every((a) => a.creditBalance === '1')).toBe(true);
      after = page.next ?? undefined;
    } while (after);
    expect(seen).toEqual(['a1', 'a2', 'a3', 'a4', 'a5']);
    await expect(run(store, 'account', 'list', '--limit', '0')).rejects.toThrow('--limit must be');
  });
});

describe('credits remove', () => {
  it('takes credit back once per reference, with a correction entry the ledger, usage and reconcile show', async () => {
    const store = await storeWith('refund', 10_000_000_000n);
    const taken = await run(store, 'credits', 'remove', 'refund', '2.5', '--ref', 'refund-7');
    expect(taken.text).toBe(
      'took $2.5 back from refund (ref refund-7, ledger entry correction#refund-7); creditBalance=$7.5',
    );
    expect(taken.json).toMatchObject({
      applied: true,
      amount: '2.5',
      reference: 'refund-7',
      creditBalance: '7.5',
    });
    const again = await run(store, 'credits', 'remove', 'refund', '2.5', '--ref', 'refund-7');
    expect(again.json).toMatchObject({ applied: false, creditBalance: '7.5' });
    expect(again.text).toBe('reference refund-7 was already applied; nothing taken; creditBalance=$7.5');
    const usage = JSON.parse((await run(store, 'usage', 'refund', '--format', 'json')).text);
    expect(usage.entries.at(-1)).toMatchObject({
      entryId: 'correction#refund-7',
      type: 'correction',
      amountUsd: '-2.5',
      reference: 'refund-7',
    });
    const reconciled = await run(store, 'reconcile', 'refund');
    expect(reconciled.exitCode).toBe(0);
    expect(await store.totalCredits('refund')).toBe(7_500_000_000n);
  });

  it('refuses to take the available credit below zero (nothing written) unless --force', async () => {
    const store = await storeWith('thin', 1_000_000_000n);
    await expect(run(store, 'credits', 'remove', 'thin', '1.5', '--ref', 'c1')).rejects.toThrow(
      "$1.5 is more than thin's available credit ($1 less $0 held): nothing taken; --force takes it anyway, below zero",
    );
    expect(store.ledger.get('thin')).toHaveLength(1);
    const forced = await run(store, 'credits', 'remove', 'thin', '1.5', '--ref', 'c1', '--force');
    expect(forced.json).toMatchObject({ applied: true, creditBalance: '-0.5', forced: true });
    expect(forced.warnings).toEqual(["thin's balance is below zero: -$0.5"]);
  });

  it('needs --ref, and refuses an unknown account', async () => {
    const store = await storeWith('thin', 1_000_000_000n);
    await expect(run(store, 'credits', 'remove', 'thin', '1')).rejects.toThrow('credits remove needs --ref');
    await expect(run(store, 'credits', 'remove', 'ghost', '1', '--ref', 'r')).rejects.toThrow(
      'no such account: ghost',
    );
    await expect(run(store, 'credits', 'add', 'thin', '1', '--ref', 'r', '--force')).rejects.toThrow(
      '--force does not apply to "credits add"',
    );
  });
});

describe('terminal output', () => {
  it('printable escapes C0 (but tab and line breaks), DEL and C1; leaves the rest', () => {
    expect(printable('a\x1b[2J\x07b\x7f\x9bc\x00')).toBe('a\\x1b[2J\\x07b\\x7f\\x9bc\\x00');
    expect(printable('one\ttwo\nthree\r\n€ é')).toBe('one\ttwo\nthree\r\n€ é');
  });

  it('jsonText leaves no DEL, C1 or bidi character raw, and reads back as the same value', () => {
    const value = { user: 'x\x7f\x9b31m\u202eevil\u2028\x1b', n: 1 };
    const text = jsonText(value);
    expect(text).not.toMatch(/[\p{Cc}\u202e\u2028]/u);
    expect(JSON.parse(text)).toEqual(value);
  });

  it('columns pads every column but the last to its widest cell', () => {
    expect(
      columns([
        ['a', 'bb', 'c'],
        ['ddd', 'e', 'f'],
      ]),
    ).toBe('a    bb  c\nddd  e   f');
  });
});
