import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, inject, it } from 'vitest';
import { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { freePort, localClient } from '../../lib/local/dynamodb-local.js';
import { runAdmin } from '../support/admin-cli.js';
import { cliTables } from '../support/cli-tables.js';

const run = promisify(execFile);
const prefix = `cli${randomBytes(3).toString('hex')}-`;
const { tables, env } = cliTables(prefix);

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

describe('operator CLI', () => {
  it('splits an account into slices, keeping its balance, and refuses a count outside 1-62', async () => {
    await json('account', 'create', 'split-me', '--credits', '8');
    expect(await json('account', 'split', 'split-me', '--slices', '4')).toEqual({
      accountId: 'split-me',
      status: 'active',
      creditBalance: 8,
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
      creditBalance: 20.5,
    });
    expect(await json('account', 'show', 'acme')).toEqual({
      accountId: 'acme',
      status: 'active',
      creditBalance: 20.5,
    });
  });

  it('--credits 0 makes the same $0 account as no --credits, with no ledger entry', async () => {
    expect(await json('account', 'create', 'nought', '--credits', '0')).toMatchObject({ creditBalance: 0 });
    expect(await json('account', 'show', 'nought')).toMatchObject({ status: 'active', creditBalance: 0 });
    expect(await json('usage', 'nought')).toMatchObject({ entries: [] });
    expect((await admin('account', 'create', 'negative', '--credits', '-1')).code).toBe(2);
  });

  it('adds credits once per payment reference', async () => {
    await json('account', 'create', 'payer');
    const first = await json('credits', 'add', 'payer', '10', '--ref', 'pay_1');
    const again = await json('credits', 'add', 'payer', '10', '--ref', 'pay_1');
    expect(first).toMatchObject({ applied: true, creditBalance: 10 });
    expect(again).toMatchObject({ applied: false, creditBalance: 10 });
    expect(await json('credits', 'add', 'payer', '0.25', '--ref', 'pay_2')).toMatchObject({
      creditBalance: 10.25,
    });
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
  });

  it('lists the ledger as json or csv, filtered by --since', async () => {
    await json('account', 'create', 'ledgered', '--credits', '3');
    await json('credits', 'add', 'ledgered', '2', '--ref', 'pay_L1');
    const listed = await json('usage', 'ledgered');
    const entries = listed.entries as { type: string; amountUsd: number; reference: string }[];
    expect(entries.map((e) => [e.type, e.amountUsd, e.reference])).toEqual([
      ['topup', 3, 'initial-credits'],
      ['topup', 2, 'pay_L1'],
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
      { user: '', requests: 1, promptTokens: 40, completionTokens: 4, costUsd: 0.000000003 },
      { user: 'alice', requests: 2, promptTokens: 40, completionTokens: 4, costUsd: 0.000000101 },
      { user: 'bob', requests: 1, promptTokens: 20, completionTokens: 2, costUsd: 0.00000025 },
    ]);
    const byKey = await json('usage', 'split', '--by', 'key');
    expect((byKey.groups as { key: string; costUsd: number }[]).map((g) => [g.key, g.costUsd])).toEqual([
      ['key_a', 0.00000035],
      ['key_b', 0.000000004],
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
      results: { accountId: string; difference: number }[];
    };
    expect(report.differences).toBe(1);
    expect(report.results.find((r) => r.accountId === 'balanced')?.difference).toBe(0.000000007);
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

describe('bin/admin.ts, as a process', () => {
  it('prints one JSON line, exits 1 with one line for an unknown account, 2 with usage for bad arguments', async () => {
    const created = await adminProcess(env, 'account', 'create', 'proc', '--json');
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout.trim().split('\n')).toHaveLength(1);
    expect(JSON.parse(created.stdout)).toMatchObject({ accountId: 'proc', creditBalance: 0 });
    const bad = await adminProcess(env, 'account', 'show', 'ghost');
    expect([bad.code, bad.stderr.trim().split('\n')]).toEqual([1, ['error: no such account: ghost']]);
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
    const shown = JSON.parse((await cli('account', 'show', 'offline')).stdout) as { creditBalance: number };
    expect(shown.creditBalance).toBe(2);
  }, 120_000);
});

describe('operator CLI: holds and bill-logged', () => {
  it('usage --format json, holds <accountId> and reconcile <accountId>: the per-account forms', async () => {
    await json('account', 'create', 'forms', '--credits', '2');
    const usage = await admin('usage', 'forms', '--format', 'json');
    expect(usage.code, usage.stderr).toBe(0);
    expect(JSON.parse(usage.stdout)).toMatchObject({
      accountId: 'forms',
      entries: [{ type: 'topup', amountUsd: 2 }],
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

  it('bill-logged bills a logged generation once, from log lines or a Logs Insights result', async () => {
    await json('account', 'create', 'logged', '--credits', '1');
    const record = {
      accountId: 'logged',
      generationId: 'gen-1767225600-LOGGEDLOGGEDLOGGED01',
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
    };
    const line = JSON.stringify({ level: 'INFO', message: 'generation usage', record });
    const dir = mkdtempSync(join(tmpdir(), 'bill-logged-'));
    const lines = join(dir, 'lines.log');
    writeFileSync(lines, `2026-01-01T00:00:00.000Z\treq-1\tINFO\t${line}\nnot a record\n`);
    expect(await json('bill-logged', lines)).toMatchObject({
      settled: [record.generationId],
      alreadySettled: [],
    });
    const insights = join(dir, 'insights.json');
    writeFileSync(insights, JSON.stringify({ results: [[{ field: '@message', value: line }]] }));
    expect(await json('bill-logged', insights)).toMatchObject({
      settled: [],
      alreadySettled: [record.generationId],
    });
    expect(await json('account', 'show', 'logged')).toMatchObject({ creditBalance: 0.99998934 });
  });
});
