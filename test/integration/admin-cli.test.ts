import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { QueryCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, inject, it } from 'vitest';
import { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { WatchItems } from '../../functions/adapters/dynamodb/watch.js';
import { accountForSignIn } from '../../functions/dashboard/accounts.js';
import {
  ensureDashboardTable,
  ensureTeamTables,
  freePort,
  localClient,
} from '../../lib/local/dynamodb-local.js';
import { runAdmin } from '../support/admin-cli.js';
import { cliTables } from '../support/cli-tables.js';
import { keyFor } from '../support/fixtures.js';
import { localTeamTables } from '../support/team-tables.js';
import { TEST_SIGNING_KEY, usageLineOf } from '../support/usage-lines.js';

const run = promisify(execFile);
const prefix = `cli${randomBytes(3).toString('hex')}-`;
const { tables, env } = cliTables(prefix);

/** The account's audit entries, oldest first, as stored. */
async function auditOf(accountId: string) {
  const client = localClient(inject('dynamoEndpoint'));
  try {
    const out = await client.send(
      new QueryCommand({
        TableName: env.AUDIT_TABLE,
        KeyConditionExpression: 'accountId = :a',
        ExpressionAttributeValues: { ':a': { S: accountId } },
      }),
    );
    return out.Items ?? [];
  } finally {
    client.destroy();
  }
}

/** The CLI in this process (test/support/admin-cli.ts); the tests at the end run bin/admin.ts itself. */
const admin = (...args: string[]) => runAdmin(args, env);
/** Runs bin/admin.ts as a user does, in its own process. */
async function adminProcess(processEnv: NodeJS.ProcessEnv, ...args: string[]) {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'bin/admin.ts', ...args], {
      env: processEnv,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
const json = async (...args: string[]) => {
  const result = await admin(...args, '--json');
  expect(result.code, result.stderr).toBe(0);
  expect(result.stdout.trim().split('\n')).toHaveLength(1);
  return JSON.parse(result.stdout) as Record<string, unknown>;
};

/** A usage record as the completions function logs it: $0.0000082 upstream for 10 + 5 svc-fast tokens. */
const loggedRecord = (accountId: string, generationId: string) => ({
  accountId,
  generationId,
  keyId: 'key_0123456789abcdef',
  tier: 'svc-fast',
  upstreamModel: 'sim-fast',
  promptTokens: 10,
  completionTokens: 5,
  cachedTokens: 0,
  upstreamCostUsd: '0.0000082',
  billedNano: '10660',
  estimated: false,
  finishReason: 'stop',
  createdAt: '2026-01-01T00:00:00.000Z',
});

/** Runs `work` with the usage-signing key (and `more`) in the environment bill-logged reads, as an operator sets it. */
async function withSigningKey<T>(work: () => Promise<T>, more: Record<string, string> = {}): Promise<T> {
  const set = { USAGE_SIGNING_KEY: TEST_SIGNING_KEY, ...more };
  Object.assign(process.env, set);
  try {
    return await work();
  } finally {
    for (const name of Object.keys(set)) delete process.env[name];
  }
}

describe('operator CLI', () => {
  it('splits an account into slices, keeping its balance, and refuses a count outside 1-62', async () => {
    await json('account', 'create', 'split-me', '--credits', '8');
    expect(await json('account', 'split', 'split-me', '--slices', '4')).toEqual({
      accountId: 'split-me',
      status: 'active',
      creditBalance: '8',
      held: '0',
      slices: 4,
    });
    for (const bad of ['0', '63', 'two', '1.5']) {
      const result = await admin('account', 'split', 'split-me', '--slices', bad);
      expect(result.code, bad).toBe(1);
      expect(result.stderr).toContain('--slices must be a whole number from 1 to 62');
    }
    expect((await admin('account', 'split', 'split-me')).code).toBe(1);
    expect((await admin('account', 'split', 'nobody', '--slices', '2')).code).toBe(1);
  });

  it('creates and shows an account, with credits in USD', async () => {
    expect(await json('account', 'create', 'acme', '--credits', '20.5')).toMatchObject({
      accountId: 'acme',
      status: 'active',
      creditBalance: '20.5',
    });
    expect(await json('account', 'show', 'acme')).toEqual({
      accountId: 'acme',
      status: 'active',
      creditBalance: '20.5',
      held: '0',
      slices: 1,
    });
  });

  it('--credits 0 makes the same $0 account as no --credits, with no ledger entry', async () => {
    expect(await json('account', 'create', 'nought', '--credits', '0')).toMatchObject({ creditBalance: '0' });
    expect(await json('account', 'show', 'nought')).toMatchObject({ status: 'active', creditBalance: '0' });
    expect(await json('usage', 'nought')).toMatchObject({ entries: [] });
    expect((await admin('account', 'create', 'negative', '--credits', '-1')).code).toBe(2);
  });

  it('adds credits once per payment reference', async () => {
    await json('account', 'create', 'payer');
    const first = await json('credits', 'add', 'payer', '10', '--ref', 'pay_1');
    const again = await json('credits', 'add', 'payer', '10', '--ref', 'pay_1');
    expect(first).toMatchObject({ applied: true, creditBalance: '10' });
    expect(again).toMatchObject({ applied: false, creditBalance: '10' });
    expect(await json('credits', 'add', 'payer', '0.25', '--ref', 'pay_2')).toMatchObject({
      creditBalance: '10.25',
    });
    // An audit entry for each credit given, none for the repeat: by the operator.
    expect(
      (await auditOf('payer')).map((e) => [
        e.actorKind?.S,
        e.action?.S,
        e.target?.S,
        e.details?.M?.amount?.S,
      ]),
    ).toEqual([
      ['operator', 'purchase', 'pay_1', '$10'],
      ['operator', 'purchase', 'pay_2', '$0.25'],
    ]);
  });

  it('suspends, bans and reinstates', async () => {
    await json('account', 'create', 'flaky');
    expect(await json('account', 'suspend', 'flaky')).toMatchObject({ status: 'suspended' });
    expect(await json('account', 'ban', 'flaky')).toMatchObject({ status: 'banned' });
    expect(await json('account', 'reinstate', 'flaky')).toMatchObject({ status: 'active' });
  });

  it('shows a new key once, lists keys without it, and revokes', async () => {
    await json('account', 'create', 'keyed');
    const created = await json('key', 'create', 'keyed', '--name', 'ci');
    expect(created.key).toMatch(/^svc_live_[0-9A-Za-z]{43}$/);
    expect(created).toMatchObject({ name: 'ci', accountId: 'keyed' });
    const listed = await admin('key', 'list', 'keyed', '--json');
    expect(listed.stdout).not.toContain(String(created.key));
    const keys = (JSON.parse(listed.stdout) as { keys: Record<string, unknown>[] }).keys;
    expect(keys).toEqual([expect.objectContaining({ keyId: created.keyId, name: 'ci', status: 'active' })]);
    expect(await json('key', 'revoke', String(created.keyId))).toMatchObject({ status: 'revoked' });
    const human = await admin('key', 'list', 'keyed');
    expect(human.stdout).toContain('revoked');
    expect(human.stdout).not.toContain(String(created.key));
    // The key's making and revocation, each with its entry, never the key itself.
    const entries = await auditOf('keyed');
    expect(entries.map((e) => [e.actorKind?.S, e.action?.S, e.target?.S])).toEqual([
      ['operator', 'key.created', created.keyId],
      ['operator', 'key.revoked', created.keyId],
    ]);
    expect(JSON.stringify(entries)).not.toContain(String(created.key));
  });

  it('lists the ledger as json or csv, filtered by --since', async () => {
    await json('account', 'create', 'ledgered', '--credits', '3');
    await json('credits', 'add', 'ledgered', '2', '--ref', 'pay_L1');
    const listed = await json('usage', 'ledgered');
    const entries = listed.entries as { type: string; amountUsd: string; reference: string }[];
    expect(entries.map((e) => [e.type, e.amountUsd, e.reference])).toEqual([
      ['topup', '3', 'initial-credits'],
      ['topup', '2', 'pay_L1'],
    ]);
    const csv = await admin('usage', 'ledgered', '--format', 'csv');
    const lines = csv.stdout.trim().split('\n');
    expect(lines[0]).toBe(
      'time,entryId,type,tier,keyId,user,promptTokens,completionTokens,cachedTokens,amountUsd,estimated,reference',
    );
    expect(lines).toHaveLength(3);
    const future = await json('usage', 'ledgered', '--since', '2999-01-01T00:00:00Z');
    expect(future.entries).toEqual([]);
    expect((await admin('usage', 'ledgered', '--format', 'xml')).code).toBe(2);
  });

  it('sums charges by key, by end user and by day, exactly', async () => {
    await json('account', 'create', 'split', '--credits', '10');
    const client = localClient(inject('dynamoEndpoint'));
    const store = new DynamoStore(client, tables);
    const charge = (n: number, keyId: string, user: string | undefined, billedNano: bigint, day: string) =>
      store.settleCharge({
        accountId: 'split',
        generationId: `gen-1767225600-SPLIT${n}`,
        keyId,
        tier: 'svc-fast',
        upstreamModel: 'sim-fast',
        promptTokens: 10 * n,
        completionTokens: n,
        cachedTokens: 0,
        upstreamCostUsd: '0',
        billedNano,
        estimated: false,
        ...(user ? { user } : {}),
        createdAt: `${day}T12:00:00.000Z`,
      });
    await charge(1, 'key_a', 'alice', 100n, '2026-11-01');
    await charge(2, 'key_a', 'bob', 250n, '2026-11-02');
    await charge(3, 'key_b', 'alice', 1n, '2026-11-02');
    await charge(4, 'key_b', undefined, 3n, '2026-11-02');
    client.destroy();
    const byUser = await json('usage', 'split', '--by', 'user');
    expect(byUser.groups).toEqual([
      { user: null, requests: 1, promptTokens: 40, completionTokens: 4, costUsd: '0.000000003' },
      { user: 'alice', requests: 2, promptTokens: 40, completionTokens: 4, costUsd: '0.000000101' },
      { user: 'bob', requests: 1, promptTokens: 20, completionTokens: 2, costUsd: '0.00000025' },
    ]);
    const byKey = await json('usage', 'split', '--by', 'key');
    expect((byKey.groups as { key: string; costUsd: string }[]).map((g) => [g.key, g.costUsd])).toEqual([
      ['key_a', '0.00000035'],
      ['key_b', '0.000000004'],
    ]);
    const byDay = await admin('usage', 'split', '--by', 'day', '--format', 'csv');
    expect(byDay.stdout.trim().split('\n')).toEqual([
      'day,requests,promptTokens,completionTokens,costUsd',
      '2026-11-01,1,10,1,0.0000001',
      '2026-11-02,3,90,9,0.000000254',
    ]);
    const rows = (await json('usage', 'split')).entries as { keyId: string; user: string }[];
    expect(rows.filter((r) => r.keyId === 'key_a').map((r) => r.user)).toEqual(['alice', 'bob']);
    expect((await admin('usage', 'split', '--by', 'tier')).code).toBe(2);
  });

  it('reconciles: exit 0 when every balance equals its ledger, 1 and the difference when one does not', async () => {
    await json('account', 'create', 'balanced', '--credits', '1');
    const ok = await admin('reconcile', 'balanced');
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('0 with a difference');
    const client = localClient(inject('dynamoEndpoint'));
    await client.send(
      new UpdateItemCommand({
        TableName: tables.accounts,
        Key: { accountId: { S: 'balanced' } },
        UpdateExpression: 'ADD creditBalance :d',
        ExpressionAttributeValues: { ':d': { N: '7' } },
      }),
    );
    client.destroy();
    const bad = await admin('reconcile', '--json');
    expect(bad.code).toBe(1);
    const report = JSON.parse(bad.stdout) as {
      differences: number;
      results: { accountId: string; difference: string }[];
    };
    expect(report.differences).toBe(1);
    expect(report.results.find((r) => r.accountId === 'balanced')?.difference).toBe('0.000000007');
  });

  it('exits 2 with usage for bad arguments', async () => {
    for (const args of [
      [],
      ['account'],
      ['account', 'fly', 'x'],
      ['credits', 'add', 'acme', '5'],
      ['key', 'create', 'acme'],
      ['account', 'show', 'acme', '--bogus'],
    ]) {
      const result = await admin(...args);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr).toContain('usage:');
    }
  });

  it('an unknown command says so and names the commands there are, exit 2 (not "no command given")', async () => {
    const unknown = await admin('bogus');
    expect(unknown.code).toBe(2);
    const first = unknown.stderr.split('\n')[0] ?? '';
    expect(first).toContain('unknown command "bogus"');
    for (const command of ['account', 'credits', 'key', 'usage', 'holds', 'reconcile', 'bill-logged'])
      expect(first).toContain(command);
    expect(unknown.stderr).toContain('usage:');
    const verb = await admin('account', 'fly', 'x');
    expect(verb.code).toBe(2);
    expect(verb.stderr.split('\n')[0]).toMatch(/unknown command "account fly".*create, show, list/);
    const bare = await admin('key');
    expect(bare.code).toBe(2);
    expect(bare.stderr.split('\n')[0]).toMatch(/"key" needs a command: create, cap, revoke, list/);
    expect((await admin()).stderr.split('\n')[0]).toContain('no command given');
  });

  it('exits 1 with one line for an unknown account or key, or a bad amount', async () => {
    for (const args of [
      ['account', 'show', 'ghost'],
      ['key', 'revoke', 'key_0000000000000000'],
      ['credits', 'add', 'ghost', '5', '--ref', 'r'],
      ['key', 'create', 'ghost', '--name', 'x'],
      ['credits', 'add', 'acme', '-5', '--ref', 'r2'],
    ]) {
      const result = await admin(...args);
      expect(result.code, args.join(' ')).toBe(args.includes('-5') ? 2 : 1);
      if (result.code === 1) expect(result.stderr.trim().split('\n')).toHaveLength(1);
    }
  });
});

/** A control character a terminal acts on: any but the line feed that ends what is printed. */
const RAW_CONTROL = /\p{Cc}/u;
const hasRawControl = (text: string) => [...text].some((char) => char !== '\n' && RAW_CONTROL.test(char));
const oneLine = (stderr: string) => {
  const lines = stderr.replace(/\n$/, '').split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).not.toMatch(RAW_CONTROL);
  return lines[0] ?? '';
};

describe('operator CLI: what it echoes', () => {
  it('escapes control characters of an argument in an error line, which stays one line', async () => {
    const title = await admin('account', 'show', 'ghost\x1b]0;pwned\x07\x1b[2J');
    expect(title.code).toBe(1);
    expect(oneLine(title.stderr)).toBe(
      'error: invalid account id "ghost\\x1b]0;pwned\\x07\\x1b[2J": use 1-64 letters, digits, ".", "_" or "-"',
    );
    const injected = await admin('usage', 'ghost\x1b[2J\ninjected line');
    expect(injected.code).toBe(1);
    expect(oneLine(injected.stderr)).toContain('ghost\\x1b[2J\\ninjected line');
    const key = await admin('key', 'revoke', 'key_\x1b[2J');
    expect(key.code).toBe(1);
    expect(oneLine(key.stderr)).toContain('key_\\x1b[2J');
    const c1 = await admin('key', 'revoke', 'key_\x9b2J\x7f');
    expect(oneLine(c1.stderr)).toContain('key_\\x9b2J\\x7f');
  });

  it('escapes them in a usage error too (an unknown option), before the usage text', async () => {
    const result = await admin('account', 'show', 'x', '--\x1b[2J');
    expect(result.code).toBe(2);
    expect(result.stderr.split('\n')[0]).toContain('\\x1b[2J');
    expect(hasRawControl(result.stderr)).toBe(false);
  });

  it('refuses a key name with control characters; --json leaves none raw (C1 and DEL as \\u escapes) and reads back the same', async () => {
    await json('account', 'create', 'echoed');
    const name = 'ci\x9b31m\x7f\x1b[2J';
    const refused = await admin('key', 'create', 'echoed', '--name', name, '--json');
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('A key name may not contain control characters');
    expect(hasRawControl(refused.stderr)).toBe(false);
    // A key named so before the rule: listed escaped.
    const client = localClient(inject('dynamoEndpoint'));
    await keyFor(new DynamoStore(client, tables), 'echoed', name);
    client.destroy();
    const listed = await admin('key', 'list', 'echoed', '--json');
    expect(hasRawControl(listed.stdout)).toBe(false);
    expect(listed.stdout).toContain('\\u009b31m\\u007f\\u001b[2J');
    expect(JSON.stringify(JSON.parse(listed.stdout))).toContain(JSON.stringify(name).slice(1, -1));
  });
});

describe('operator CLI: exact money and its maximum', () => {
  it('shows $12,345,678.123456789 to the nano: account show, --json, reconcile --json, usage --format json', async () => {
    const client = localClient(inject('dynamoEndpoint'));
    await new DynamoStore(client, tables).createAccount(
      'rich',
      12_345_678_123_456_789n,
      new Date().toISOString(),
    );
    client.destroy();
    const shown = await admin('account', 'show', 'rich');
    expect(shown.stdout.trim()).toBe(
      'rich  status=active  creditBalance=$12345678.123456789  held=$0  slices=1',
    );
    expect(await json('account', 'show', 'rich')).toMatchObject({ creditBalance: '12345678.123456789' });
    expect((await admin('account', 'show', 'rich', '--json')).stdout).toContain(
      '"creditBalance":"12345678.123456789"',
    );
    const reconciled = (await json('reconcile', 'rich')) as { results: Record<string, unknown>[] };
    expect(reconciled.results[0]).toMatchObject({
      creditBalance: '12345678.123456789',
      ledgerBalance: '12345678.123456789',
      difference: '0',
    });
    const usage = await admin('usage', 'rich', '--format', 'json');
    expect(JSON.parse(usage.stdout).entries[0]).toMatchObject({ amountUsd: '12345678.123456789' });
  });

  it('refuses more than $1,000,000 in one command, exit 1 and one line, before anything is written', async () => {
    await json('account', 'create', 'capped', '--credits', '1');
    for (const amount of ['9999999999999999999999999999', '1000000.000000001']) {
      const added = await admin('credits', 'add', 'capped', amount, '--ref', 'too-much');
      expect(added.code).toBe(1);
      expect(oneLine(added.stderr)).toBe(
        `error: amount $${amount} is above the maximum of $1000000 a command; split a larger one over several references`,
      );
    }
    expect((await admin('account', 'create', 'capped-2', '--credits', '1000001')).code).toBe(1);
    expect((await admin('account', 'show', 'capped-2')).code).toBe(1);
    expect((await json('usage', 'capped')).entries).toHaveLength(1);
    expect(await json('credits', 'add', 'capped', '1000000', '--ref', 'max')).toMatchObject({
      applied: true,
      creditBalance: '1000001',
    });
  });
});

describe('operator CLI: as the README says', () => {
  it('account split to fewer slices than the account has: exit 1, saying so; show prints the slice count', async () => {
    await json('account', 'create', 'sixteen', '--credits', '16');
    expect(await json('account', 'split', 'sixteen', '--slices', '16')).toMatchObject({ slices: 16 });
    const fewer = await admin('account', 'split', 'sixteen', '--slices', '4');
    expect(fewer.code).toBe(1);
    expect(oneLine(fewer.stderr)).toBe(
      'error: account sixteen has 16 slices and slices never decrease: not split into 4',
    );
    expect((await admin('account', 'show', 'sixteen')).stdout.trim()).toBe(
      'sixteen  status=active  creditBalance=$16  held=$0  slices=16',
    );
  });

  it('key create on a suspended account: created, exit 0, a warning on stderr, one JSON object on stdout', async () => {
    await json('account', 'create', 'resting');
    await json('account', 'suspend', 'resting');
    const created = await admin('key', 'create', 'resting', '--name', 'early', '--json');
    expect(created.code).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ accountId: 'resting', accountStatus: 'suspended' });
    expect(oneLine(created.stderr)).toBe(
      'warning: account resting is suspended: this key is refused (403) until the account is reinstated',
    );
  });

  it('account list pages through every account (a Scan), slices left out, a split account at its total', async () => {
    await json('account', 'create', 'listed-a', '--credits', '1');
    await json('account', 'create', 'listed-b', '--credits', '8');
    await json('account', 'split', 'listed-b', '--slices', '4');
    const seen: { accountId: string; creditBalance: string; slices: number }[] = [];
    let after: string | undefined;
    let pages = 0;
    do {
      const page = (await json('account', 'list', '--limit', '3', ...(after ? ['--after', after] : []))) as {
        accounts: typeof seen;
        next: string | null;
      };
      expect(page.accounts.length).toBeLessThanOrEqual(3);
      seen.push(...page.accounts);
      after = page.next ?? undefined;
      pages += 1;
    } while (after && pages < 100);
    const ids = seen.map((a) => a.accountId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.some((id) => id.includes('#'))).toBe(false);
    expect(ids).toEqual(expect.arrayContaining(['listed-a', 'listed-b']));
    expect(seen.find((a) => a.accountId === 'listed-b')).toMatchObject({ creditBalance: '8', slices: 4 });
    expect(pages).toBeGreaterThan(1);
    const text = await admin('account', 'list', '--limit', '1');
    expect(text.stdout.split('\n')[0]).toMatch(
      /^accountId +email +status +creditBalance +held +slices +created$/,
    );
    expect(text.stdout).toMatch(/\nmore: account list --after \S+ --limit 1\n$/);
  });
});

describe('operator CLI: customers by e-mail', () => {
  it("account list shows each account's e-mail; account find <email> finds its account, any case", async () => {
    // A customer as the dashboard makes one: the account of a first sign-in, and the address it signed in with.
    const table = env.DASHBOARD_TABLE;
    process.env.DASHBOARD_TABLE = table; // the store's dashboard items read it at their first use
    const client = localClient(inject('dynamoEndpoint'));
    await ensureDashboardTable(client, table);
    // A first sign-in makes its person the account's owner: a member, in the team table.
    await ensureTeamTables(client, localTeamTables());
    const store = new DynamoStore(client, tables);
    const subject = `subject-${randomBytes(4).toString('hex')}`;
    const now = new Date().toISOString();
    const accountId = await accountForSignIn(store, { subject, email: 'Ann.Customer@Example.com' }, now);
    await new WatchItems({ client: store.client, tables: store.tables, wire: store.wire }).rememberEmail(
      subject,
      'Ann.Customer@Example.com',
      now,
    );
    client.destroy();
    expect(accountId).toMatch(/^acct-[0-9a-f]{24}$/);

    await json('account', 'create', 'mailless'); // made by an operator: no dashboard user, no address
    const listed = (await json('account', 'list', '--limit', '1000')) as {
      accounts: { accountId: string; emails: string[] }[];
    };
    expect(listed.accounts.find((a) => a.accountId === accountId)?.emails).toEqual([
      'Ann.Customer@Example.com',
    ]);
    expect(listed.accounts.find((a) => a.accountId === 'mailless')?.emails).toEqual([]);
    const text = await admin('account', 'list', '--limit', '1000');
    expect(text.stdout.split('\n')[0]).toMatch(
      /^accountId +email +status +creditBalance +held +slices +created$/,
    );
    expect(text.stdout).toMatch(new RegExp(`\\n${accountId} +Ann\\.Customer@Example\\.com +active +\\$0 `));

    expect(await json('account', 'find', 'ann.customer@example.com')).toEqual({
      email: 'ann.customer@example.com',
      accounts: [
        {
          accountId,
          status: 'active',
          creditBalance: '0',
          held: '0',
          slices: 1,
          emails: ['Ann.Customer@Example.com'],
        },
      ],
    });
    const found = await admin('account', 'find', 'ann.customer@example.com');
    expect(found.stdout).toMatch(
      new RegExp(`^accountId +email +status.*\\n${accountId} +Ann\\.Customer@Example\\.com +active`),
    );
    const nobody = await admin('account', 'find', 'nobody@example.com');
    expect([nobody.code, nobody.stderr.trim().split('\n')]).toEqual([
      1,
      ['error: no account has the e-mail address nobody@example.com'],
    ]);
  });
});

describe('operator CLI: credits remove', () => {
  it('takes credit back once per reference: a correction entry in usage, reconcile clean, total credits lower', async () => {
    await json('account', 'create', 'refunded', '--credits', '10');
    expect(await json('credits', 'remove', 'refunded', '2.5', '--ref', 'refund-1')).toMatchObject({
      applied: true,
      amount: '2.5',
      creditBalance: '7.5',
    });
    expect(await json('credits', 'remove', 'refunded', '2.5', '--ref', 'refund-1')).toMatchObject({
      applied: false,
      creditBalance: '7.5',
    });
    const entries = (await json('usage', 'refunded')).entries as Record<string, unknown>[];
    expect(entries.map((e) => [e.entryId, e.type, e.amountUsd, e.reference])).toEqual([
      ['topup#initial-credits', 'topup', '10', 'initial-credits'],
      ['correction#refund-1', 'correction', '-2.5', 'refund-1'],
    ]);
    expect((await admin('usage', 'refunded', '--format', 'csv')).stdout).toContain(
      ',correction#refund-1,correction,,,,,,,-2.5,,refund-1',
    );
    const reconciled = await admin('reconcile', 'refunded');
    expect(reconciled.code, reconciled.stdout).toBe(0);
    const client = localClient(inject('dynamoEndpoint'));
    const store = new DynamoStore(client, tables);
    expect(await store.totalCredits('refunded')).toBe(7_500_000_000n);
    expect(await store.getLedgerEntry('refunded', 'correction#refund-1')).toMatchObject({
      type: 'correction',
      deltaNano: -2_500_000_000n,
      reference: 'refund-1',
    });
    client.destroy();
  });

  it('refuses to go below zero (exit 1, nothing written) unless --force; the correction reconciles either way', async () => {
    await json('account', 'create', 'nearly-empty', '--credits', '1');
    const refused = await admin('credits', 'remove', 'nearly-empty', '3', '--ref', 'chargeback-1');
    expect(refused.code).toBe(1);
    expect(oneLine(refused.stderr)).toBe(
      "error: $3 is more than nearly-empty's available credit ($1 less $0 held): nothing taken; --force takes it anyway, below zero",
    );
    expect((await json('usage', 'nearly-empty')).entries).toHaveLength(1);
    expect(await json('account', 'show', 'nearly-empty')).toMatchObject({ creditBalance: '1' });
    const forced = await admin('credits', 'remove', 'nearly-empty', '3', '--ref', 'chargeback-1', '--force');
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.stdout).toContain('creditBalance=-$2');
    expect(oneLine(forced.stderr)).toBe("warning: nearly-empty's balance is below zero: -$2");
    expect((await admin('reconcile', 'nearly-empty')).code).toBe(0);
  });

  it('counts what requests in flight hold against it, and applies a reference once when two race', async () => {
    await json('account', 'create', 'in-flight', '--credits', '5');
    const client = localClient(inject('dynamoEndpoint'));
    const store = new DynamoStore(client, tables);
    const hold = {
      accountId: 'in-flight',
      holdId: 'gen-1767225600-INFLIGHTINFLIGHT01',
      amountNano: 2_000_000_000n,
      expiresAt: Date.now() + 600_000,
      createdAt: new Date().toISOString(),
    };
    expect(await store.placeHold(hold)).toBe('held');
    const refused = await admin('credits', 'remove', 'in-flight', '4', '--ref', 'held-back');
    expect(oneLine(refused.stderr)).toBe(
      "error: $4 is more than in-flight's available credit ($5 less $2 held): nothing taken; --force takes it anyway, below zero",
    );
    const now = new Date().toISOString();
    const outcomes = await Promise.all(
      [1, 2, 3].map(() => store.removeCredits('in-flight', 'race-1', 1_000_000_000n, now)),
    );
    expect(outcomes.filter((o) => o === 'applied')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'already-applied')).toHaveLength(2);
    expect((await store.getAccount('in-flight'))?.balanceNano).toBe(4_000_000_000n);
    expect(await store.releaseHold(hold)).toBe(true);
    client.destroy();
    expect((await admin('reconcile', 'in-flight')).code).toBe(0);
  });

  it('on a split account: gathers what slice 0 lacks from the other slices, then evens them out', async () => {
    await json('account', 'create', 'spread', '--credits', '8');
    await json('account', 'split', 'spread', '--slices', '4');
    expect(await json('credits', 'remove', 'spread', '7', '--ref', 'refund-split')).toMatchObject({
      applied: true,
      creditBalance: '1',
      slices: 4,
    });
    const refused = await admin('credits', 'remove', 'spread', '1.5', '--ref', 'refund-split-2');
    expect(refused.code).toBe(1);
    expect((await admin('reconcile', 'spread')).code).toBe(0);
    const client = localClient(inject('dynamoEndpoint'));
    const store = new DynamoStore(client, tables);
    expect((await store.getAccount('spread'))?.balanceNano).toBe(1_000_000_000n);
    client.destroy();
  });
});

describe('bin/admin.ts, as a process', () => {
  it('prints one JSON line, exits 1 with one line for an unknown account, 2 with usage for bad arguments', async () => {
    const created = await adminProcess(env, 'account', 'create', 'proc', '--json');
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout.trim().split('\n')).toHaveLength(1);
    expect(JSON.parse(created.stdout)).toMatchObject({ accountId: 'proc', creditBalance: '0' });
    const bad = await adminProcess(env, 'account', 'show', 'ghost');
    expect([bad.code, bad.stderr.trim().split('\n')]).toEqual([1, ['error: no such account: ghost']]);
    const hostile = await adminProcess(env, 'account', 'show', 'ghost\x1b]0;pwned\x07\x1b[2J');
    expect(hostile.code).toBe(1);
    expect(oneLine(hostile.stderr)).toContain('"ghost\\x1b]0;pwned\\x07\\x1b[2J"');
    const usage = await adminProcess(env, 'account', 'fly', 'x');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('usage:');
  }, 120_000);
});

describe('operator CLI without a running service', () => {
  it('starts DynamoDB Local on the data directory for each command, and the data stays', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'svc-admin-'));
    const standalone = {
      ...process.env,
      SVC_DATA_DIR: dataDir,
      DYNAMODB_LOCAL_PORT: String(await freePort()),
      DYNAMODB_ENDPOINT: '',
    };
    const cli = async (...args: string[]) => {
      const result = await adminProcess(standalone, ...args, '--json');
      expect(result.code, result.stderr).toBe(0);
      return result;
    };
    await cli('account', 'create', 'offline', '--credits', '2');
    const shown = JSON.parse((await cli('account', 'show', 'offline')).stdout) as { creditBalance: string };
    expect(shown.creditBalance).toBe('2');
  }, 120_000);
});

describe('operator CLI: holds and bill-logged', () => {
  it('usage --format json, holds <accountId> and reconcile <accountId>: the per-account forms', async () => {
    await json('account', 'create', 'forms', '--credits', '2');
    const usage = await admin('usage', 'forms', '--format', 'json');
    expect(usage.code, usage.stderr).toBe(0);
    expect(JSON.parse(usage.stdout)).toMatchObject({
      accountId: 'forms',
      entries: [{ type: 'topup', amountUsd: '2' }],
    });
    expect(await json('holds', 'forms')).toEqual({ holds: [] });
    const reconciled = await admin('reconcile', 'forms');
    expect(reconciled.code, reconciled.stderr).toBe(0);
  });

  it("holds without an account lists every account's holds", async () => {
    const result = await admin('holds');
    expect(result.code, result.stderr).toBe(0);
    expect(await json('holds')).toHaveProperty('holds');
  });

  it('bill-logged bills a signed logged generation once, from log lines or a Logs Insights result', async () => {
    await json('account', 'create', 'logged', '--credits', '1');
    const record = loggedRecord('logged', 'gen-1767225600-0OGGEDLOGGEDLOGGED01');
    const line = usageLineOf(record, TEST_SIGNING_KEY);
    const dir = mkdtempSync(join(tmpdir(), 'bill-logged-'));
    const lines = join(dir, 'lines.log');
    writeFileSync(lines, `2026-01-01T00:00:00.000Z\treq-1\tINFO\t${line}\nnot a record\n`);
    expect(await withSigningKey(() => json('bill-logged', lines))).toMatchObject({
      settled: [record.generationId],
      alreadySettled: [],
    });
    const insights = join(dir, 'insights.json');
    writeFileSync(insights, JSON.stringify({ results: [[{ field: '@message', value: line }]] }));
    expect(await withSigningKey(() => json('bill-logged', insights))).toMatchObject({
      settled: [],
      alreadySettled: [record.generationId],
    });
    expect(await json('account', 'show', 'logged')).toMatchObject({ creditBalance: '0.99998934' });
  });

  it('bill-logged refuses a forged line: unsigned, wrongly signed or beyond its bounds; an unsigned one only when asked', async () => {
    await json('account', 'create', 'forged', '--credits', '1');
    const dir = mkdtempSync(join(tmpdir(), 'bill-logged-'));
    const file = (name: string, ...lines: string[]) => {
      writeFileSync(join(dir, name), `${lines.join('\n')}\n`);
      return join(dir, name);
    };
    const unsigned = loggedRecord('forged', 'gen-1767225600-0ORGEDFORGEDFORGED01');
    // A bill of $1,000,000 on a new id, signed with a key that is not the stack's.
    const huge = {
      ...loggedRecord('forged', 'gen-1767225600-0ORGEDFORGEDFORGED02'),
      billedNano: '1000000000000000',
    };
    const forged = file('forged.log', usageLineOf(unsigned, null), usageLineOf(huge, 'not-the-key'));
    expect(await withSigningKey(() => json('bill-logged', forged))).toMatchObject({
      settled: [],
      alreadySettled: [],
      invalid: 2,
      refused: [
        { generationId: unsigned.generationId, accountId: 'forged', reason: 'unsigned' },
        { generationId: huge.generationId, accountId: 'forged', reason: 'signature does not match' },
      ],
    });
    // Without the key a signature cannot be checked: one line saying which variable to set.
    const keyless = await admin('bill-logged', forged);
    expect([keyless.code, keyless.stderr]).toEqual([
      1,
      expect.stringMatching(/^error: .*USAGE_SIGNING_SECRET_ARN/),
    ]);
    // The operator vouches for unsigned lines (logged before lines were signed): still held to their bounds.
    const vouched = file('vouched.log', usageLineOf(unsigned, null), usageLineOf(huge, null));
    expect(
      await withSigningKey(() => json('bill-logged', vouched), { BILL_LOGGED_ACCEPT_UNSIGNED: '1' }),
    ).toMatchObject({
      settled: [unsigned.generationId],
      refused: [{ generationId: huge.generationId, reason: expect.stringMatching(/^out of bounds: /) }],
    });
    expect(await json('account', 'show', 'forged')).toMatchObject({ creditBalance: '0.99998934' });
  });
});

describe("a key's daily spend cap from the CLI", () => {
  /** The operator's environment without KEY_DAILY_CAPS (caps off, the default), and with it on. */
  const capsOff: NodeJS.ProcessEnv = { ...env };
  delete capsOff.KEY_DAILY_CAPS;
  const capsOn = { ...capsOff, KEY_DAILY_CAPS: 'on' };
  const OFF_LINE =
    'error: per-key daily caps are off: deploy with -c keyDailyCaps=true (locally KEY_DAILY_CAPS=on, for npm start and npm run admin)\n';

  it('refuses `key cap` and `--daily-cap-usd` with caps off: one line naming the setting, exit 1, nothing written', async () => {
    await json('account', 'create', 'uncapped');
    const created = await json('key', 'create', 'uncapped', '--name', 'ci');
    const keyId = String(created.keyId);
    const cap = await runAdmin(['key', 'cap', keyId, '--usd', '1'], capsOff);
    expect([cap.code, cap.stdout, cap.stderr]).toEqual([1, '', OFF_LINE]);
    const none = await runAdmin(['key', 'cap', keyId, '--none'], capsOff);
    expect([none.code, none.stderr]).toEqual([1, OFF_LINE]);
    const withCap = await runAdmin(
      ['key', 'create', 'uncapped', '--name', 'x', '--daily-cap-usd', '1'],
      capsOff,
    );
    expect([withCap.code, withCap.stdout, withCap.stderr]).toEqual([1, '', OFF_LINE]);
    const keys = (
      JSON.parse((await runAdmin(['key', 'list', 'uncapped', '--json'], capsOff)).stdout) as {
        keys: Record<string, unknown>[];
      }
    ).keys;
    expect(keys.map((k) => [k.name, k.dailyCap])).toEqual([['ci', undefined]]);
  });

  it('sets, shows and removes a cap with KEY_DAILY_CAPS=on; with caps off the stored cap is kept but not shown', async () => {
    await json('account', 'create', 'capping');
    const created = await json('key', 'create', 'capping', '--name', 'ci');
    const keyId = String(created.keyId);
    const set = await runAdmin(['key', 'cap', keyId, '--usd', '2.5', '--json'], capsOn);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ keyId, dailyCap: '2.5' });
    expect((await runAdmin(['key', 'list', 'capping'], capsOn)).stdout).toContain('daily cap');
    const offList = await runAdmin(['key', 'list', 'capping'], capsOff);
    expect(offList.stdout).not.toContain('daily cap');
    // Kept, not deleted: on again, it is there.
    expect(
      (
        JSON.parse((await runAdmin(['key', 'list', 'capping', '--json'], capsOn)).stdout) as {
          keys: Record<string, unknown>[];
        }
      ).keys[0],
    ).toMatchObject({ dailyCap: '2.5' });
    const createdCapped = await runAdmin(
      ['key', 'create', 'capping', '--name', 'y', '--daily-cap-usd', '1', '--json'],
      capsOn,
    );
    expect(JSON.parse(createdCapped.stdout)).toMatchObject({ dailyCap: '1' });
    const removed = await runAdmin(['key', 'cap', keyId, '--none', '--json'], capsOn);
    expect(JSON.parse(removed.stdout).dailyCap).toBeUndefined();
  });
});
