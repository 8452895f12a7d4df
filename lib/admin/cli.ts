import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoStore, tableNamesFromEnv } from '../../functions/adapters/dynamodb/index.js';
import { nanoToUsd } from '../../functions/billing/money.js';
import { ensureTables, localClient } from '../local/dynamodb-local.js';
import { localDynamoSettings } from '../local/settings.js';
import { connectDynamo, localTableNames } from '../local/stack.js';
import { TABLE_ENV } from '../tables.js';
import { toCsv } from './csv.js';
import {
  type AdminContext,
  addCredits,
  checkAccountId,
  createAccount,
  createKey,
  listHolds,
  listKeys,
  listLedger,
  reconcile,
  revokeKey,
  setAccountStatus,
  showAccount,
  splitAccount,
} from './operations.js';
import { terminalSafe as safe } from './terminal.js';
import { billLoggedGenerations } from './usage-records.js';

const USAGE = `usage: npm run --silent admin -- <command> [--json]

  account create <accountId> [--credits <usd>]
  account show <accountId>
  account suspend <accountId>
  account ban <accountId>
  account reinstate <accountId>
  account split <accountId> --slices <n>   spread a busy account's balance over n items (1-62)
  credits add <accountId> <usd> --ref <reference>
  key create <accountId> --name <label>
  key revoke <keyId>
  key list <accountId>
  usage <accountId> [--since <iso time>] [--format json|csv] [--by key|user|day]
  holds [<accountId>]
  reconcile [<accountId>]
  bill-logged <file|->   bill the generations whose logged usage record has no ledger entry

Environment: DYNAMODB_ENDPOINT (a running DynamoDB), else DynamoDB Local on DYNAMODB_LOCAL_PORT
(default 8000) with its data under SVC_DATA_DIR (default .data), started for the command if it is
not running. With KEYS_TABLE, ACCOUNTS_TABLE, LEDGER_TABLE and HOLDS_TABLE set and no DYNAMODB_ENDPOINT,
the deployed tables in AWS (credentials and region from the environment).`;

class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export interface CliResult {
  /** The command's result as one JSON object (printed with --json). */
  json: Record<string, unknown>;
  /** The same for a person. */
  text: string;
  /** `text` is already the requested machine format (usage --format): print it as it is. */
  raw?: boolean;
  exitCode?: number;
}

interface Parsed {
  positionals: string[];
  values: {
    json?: boolean;
    credits?: string;
    ref?: string;
    name?: string;
    since?: string;
    format?: string;
    by?: string;
    slices?: string;
    help?: boolean;
  };
}

export function parseCommandLine(argv: string[]): Parsed {
  try {
    const { positionals, values } = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        json: { type: 'boolean' },
        credits: { type: 'string' },
        ref: { type: 'string' },
        name: { type: 'string' },
        since: { type: 'string' },
        format: { type: 'string' },
        by: { type: 'string' },
        slices: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    return { positionals, values };
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

function expectArgs(
  positionals: string[],
  count: number,
  allowed: readonly string[],
  values: Parsed['values'],
): void {
  if (positionals.length !== count)
    throw new UsageError(`expected ${count - 2} argument(s) after "${positionals.slice(0, 2).join(' ')}"`);
  for (const [flag, value] of Object.entries(values)) {
    if (value !== undefined && flag !== 'json' && !allowed.includes(flag))
      throw new UsageError(`--${flag} does not apply to "${positionals.slice(0, 2).join(' ')}"`);
  }
}

export async function runCommand(ctx: AdminContext, parsed: Parsed): Promise<CliResult> {
  const { positionals: p, values } = parsed;
  const [group, verb] = p;
  const arg = p[2] ?? '';
  if (group === 'usage') return usageCommand(ctx, p, values);
  if (group === 'reconcile') return reconcileCommand(ctx, p, values);
  if (group === 'holds') return holdsCommand(ctx, p, values);
  if (group === 'bill-logged') return billLoggedCommand(ctx, p);
  const command = `${group ?? ''} ${verb ?? ''}`;
  switch (command) {
    case 'account create': {
      expectArgs(p, 3, ['credits'], values);
      const account = await createAccount(ctx, arg, values.credits);
      return {
        json: { ...account },
        text: `created account ${account.accountId} with $${account.creditBalance} of credits`,
      };
    }
    case 'account show': {
      expectArgs(p, 3, [], values);
      const account = await showAccount(ctx, arg);
      return {
        json: { ...account },
        text: `${account.accountId}  status=${account.status}  creditBalance=$${account.creditBalance}`,
      };
    }
    case 'account split': {
      expectArgs(p, 3, ['slices'], values);
      const account = await splitAccount(ctx, checkAccountId(arg), values.slices);
      return {
        json: { ...account },
        text: `account ${account.accountId} is split into ${account.slices ?? 1} slices; creditBalance=$${account.creditBalance}`,
      };
    }
    case 'account suspend':
    case 'account ban':
    case 'account reinstate': {
      expectArgs(p, 3, [], values);
      const status = verb === 'suspend' ? 'suspended' : verb === 'ban' ? 'banned' : 'active';
      const account = await setAccountStatus(ctx, checkAccountId(arg), status);
      return { json: { ...account }, text: `account ${account.accountId} is now ${account.status}` };
    }
    case 'credits add': {
      expectArgs(p, 4, ['ref'], values);
      if (!values.ref) throw new UsageError('credits add needs --ref <reference> (the payment reference)');
      const { applied, account } = await addCredits(ctx, arg, p[3] ?? '', values.ref);
      return {
        json: { ...account, applied, reference: values.ref },
        text: applied
          ? `added $${p[3]} to ${account.accountId} (ref ${values.ref}); creditBalance=$${account.creditBalance}`
          : `reference ${values.ref} was already applied; nothing added; creditBalance=$${account.creditBalance}`,
      };
    }
    case 'key create': {
      expectArgs(p, 3, ['name'], values);
      if (!values.name) throw new UsageError('key create needs --name <label>');
      const created = await createKey(ctx, arg, values.name);
      return {
        json: { ...created },
        text: `created key ${created.keyId} ("${safe(created.name)}") for ${created.accountId}.\nThis is the only time the key is shown; store it now:\n\n  ${created.key}\n`,
      };
    }
    case 'key revoke': {
      expectArgs(p, 3, [], values);
      const key = await revokeKey(ctx, arg);
      return { json: { ...key }, text: `revoked key ${key.keyId}` };
    }
    case 'key list': {
      expectArgs(p, 3, [], values);
      const keys = await listKeys(ctx, arg);
      const lines = keys.map(
        (k) => `${k.keyId}  ${k.displayPrefix}  ${k.status.padEnd(7)}  ${k.createdAt}  ${safe(k.name)}`,
      );
      return { json: { accountId: arg, keys }, text: lines.length ? lines.join('\n') : `no keys for ${arg}` };
    }
    default:
      throw new UsageError(group ? `unknown command "${p.join(' ')}"` : 'no command given');
  }
}

const CSV_COLUMNS = [
  'time',
  'entryId',
  'type',
  'tier',
  'keyId',
  'user',
  'promptTokens',
  'completionTokens',
  'cachedTokens',
  'amountUsd',
  'estimated',
  'reference',
] as const;

/** `usage <accountId> [--since <iso>] [--format json|csv]`: the account's ledger, oldest first. */
async function usageCommand(ctx: AdminContext, p: string[], values: Parsed['values']): Promise<CliResult> {
  if (p.length !== 2) throw new UsageError('usage takes one account id');
  for (const flag of ['credits', 'ref', 'name'] as const)
    if (values[flag] !== undefined) throw new UsageError(`--${flag} does not apply to "usage"`);
  const accountId = p[1] ?? '';
  const format = values.format ?? (values.json ? 'json' : 'table');
  if (!['json', 'csv', 'table'].includes(format)) throw new UsageError('--format must be json or csv');
  let since: string | undefined;
  if (values.since !== undefined) {
    const time = new Date(values.since);
    if (Number.isNaN(time.getTime()))
      throw new UsageError(`--since must be an ISO time, got ${JSON.stringify(values.since)}`);
    since = time.toISOString();
  }
  await showAccount(ctx, accountId); // throws for an unknown account
  const entries = (await listLedger(ctx, accountId)).filter(
    (entry) => since === undefined || entry.createdAt >= since,
  );
  const rows = entries.map((entry) => ({
    time: entry.createdAt,
    entryId: entry.entryId,
    type: entry.type,
    tier: entry.tier ?? '',
    keyId: entry.keyId ?? '',
    user: entry.user ?? '',
    promptTokens: entry.promptTokens ?? '',
    completionTokens: entry.completionTokens ?? '',
    cachedTokens: entry.cachedTokens ?? '',
    amountUsd: nanoToUsd(entry.deltaNano),
    estimated: entry.type === 'charge' ? Boolean(entry.estimated) : '',
    reference: entry.reference ?? '',
  }));
  if (values.by !== undefined) return usageSummary(accountId, entries, values.by, format);
  const json = { accountId, entries: rows.map((row) => ({ ...row, amountUsd: Number(row.amountUsd) })) };
  if (format === 'csv') return { json, text: toCsv(CSV_COLUMNS, rows), raw: true };
  if (format === 'json') return { json, text: JSON.stringify(json), raw: true };
  const lines = rows.map(
    (row) =>
      `${row.time}  ${row.type.padEnd(6)}  ${row.amountUsd.padStart(14)}  ${safe(row.entryId)}  ${safe(row.tier)} ${row.type === 'charge' ? `${row.promptTokens}+${row.completionTokens} tokens${row.estimated ? ' (estimated)' : ''}` : ''}`,
  );
  return { json, text: lines.length ? lines.join('\n') : `no ledger entries for ${accountId}` };
}

/**
 * `usage --by key|user|day`: the charges summed per API key, per end user (the request's `user`), or
 * per UTC day: requests, tokens and cost, exact (summed in nano-USD).
 */
function usageSummary(
  accountId: string,
  entries: Awaited<ReturnType<typeof listLedger>>,
  by: string,
  format: string,
): CliResult {
  if (!['key', 'user', 'day'].includes(by)) throw new UsageError('--by must be key, user or day');
  const groups = new Map<
    string,
    { requests: number; promptTokens: number; completionTokens: number; costNano: bigint }
  >();
  for (const entry of entries) {
    if (entry.type !== 'charge') continue;
    const group =
      by === 'key' ? (entry.keyId ?? '') : by === 'user' ? (entry.user ?? '') : entry.createdAt.slice(0, 10);
    const sum = groups.get(group) ?? { requests: 0, promptTokens: 0, completionTokens: 0, costNano: 0n };
    sum.requests += 1;
    sum.promptTokens += entry.promptTokens ?? 0;
    sum.completionTokens += entry.completionTokens ?? 0;
    sum.costNano += -entry.deltaNano;
    groups.set(group, sum);
  }
  const rows = [...groups.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([group, sum]) => ({
      [by]: group,
      requests: sum.requests,
      promptTokens: sum.promptTokens,
      completionTokens: sum.completionTokens,
      costUsd: nanoToUsd(sum.costNano),
    }));
  const json = { accountId, by, groups: rows.map((row) => ({ ...row, costUsd: Number(row.costUsd) })) };
  if (format === 'json') return { json, text: JSON.stringify(json), raw: true };
  if (format === 'csv')
    return {
      json,
      text: toCsv([by, 'requests', 'promptTokens', 'completionTokens', 'costUsd'], rows),
      raw: true,
    };
  const lines = rows.map(
    (row) =>
      `${(safe(String(row[by])) || '(none)').padEnd(24)}  ${String(row.requests).padStart(6)} requests  ${row.promptTokens}+${row.completionTokens} tokens  $${row.costUsd}`,
  );
  return { json, text: lines.length ? lines.join('\n') : `no charges for ${accountId}` };
}

/** `reconcile [<accountId>]`: creditBalance must equal top-ups minus charges, for every account. */
async function reconcileCommand(
  ctx: AdminContext,
  p: string[],
  values: Parsed['values'],
): Promise<CliResult> {
  if (p.length > 2) throw new UsageError('reconcile takes at most one account id');
  for (const flag of ['credits', 'ref', 'name', 'since', 'format', 'by'] as const)
    if (values[flag] !== undefined) throw new UsageError(`--${flag} does not apply to "reconcile"`);
  const results = await reconcile(ctx, p[1]);
  const differences = results.filter((r) => r.differenceNano !== 0n);
  const json = {
    accounts: results.length,
    differences: differences.length,
    results: results.map((r) => ({
      accountId: r.accountId,
      creditBalance: Number(nanoToUsd(r.balanceNano)),
      ledgerBalance: Number(nanoToUsd(r.ledgerNano)),
      difference: Number(nanoToUsd(r.differenceNano)),
      held: Number(nanoToUsd(r.heldNano)),
      holds: Number(nanoToUsd(r.holdsNano)),
      entries: r.entries,
    })),
  };
  const lines = results.map(
    (r) =>
      `${r.differenceNano === 0n ? 'ok  ' : 'DIFF'}  ${r.accountId}  creditBalance=$${nanoToUsd(r.balanceNano)}  ledger=$${nanoToUsd(r.ledgerNano)}  held=$${nanoToUsd(r.heldNano)}  holds=$${nanoToUsd(r.holdsNano)}  difference=$${nanoToUsd(r.differenceNano)}  (${r.entries} entries)`,
  );
  lines.push(`${results.length} account(s) checked, ${differences.length} with a difference`);
  return { json, text: lines.join('\n'), exitCode: differences.length > 0 ? 1 : 0 };
}

/** `holds [<accountId>]`: live and expired (not yet swept) holds, soonest expiry first. */
async function holdsCommand(ctx: AdminContext, p: string[], values: Parsed['values']): Promise<CliResult> {
  if (p.length > 2) throw new UsageError('holds takes at most one account id');
  for (const flag of ['credits', 'ref', 'name', 'since', 'format', 'by'] as const)
    if (values[flag] !== undefined) throw new UsageError(`--${flag} does not apply to "holds"`);
  const holds = await listHolds(ctx, p[1]);
  const json = {
    holds: holds.map((h) => ({
      accountId: h.accountId,
      holdId: h.holdId,
      amountUsd: Number(nanoToUsd(h.amountNano)),
      createdAt: h.createdAt,
      expiresAt: h.expiresAt,
      expired: h.expired,
    })),
  };
  const lines = holds.map(
    (h) =>
      `${h.expired ? 'EXPIRED' : 'live   '}  ${h.accountId}  ${h.holdId}  $${nanoToUsd(h.amountNano)}  expires ${h.expiresAt}`,
  );
  return { json, text: lines.length ? lines.join('\n') : 'no holds' };
}

/** Where the CLI's tables are: the deployed ones, a given endpoint, or DynamoDB Local on the data directory. */
async function openContext(
  env: NodeJS.ProcessEnv,
): Promise<{ ctx: AdminContext; close: () => Promise<void> }> {
  const deployed =
    !env.DYNAMODB_ENDPOINT && env[TABLE_ENV.keys] && env[TABLE_ENV.accounts] && env[TABLE_ENV.ledger];
  if (deployed) {
    if (!env[TABLE_ENV.holds])
      throw new UsageError(`set ${TABLE_ENV.holds} too (the stack output HoldsTableName)`);
    const client = new DynamoDBClient({});
    return {
      ctx: { store: new DynamoStore(client, tableNamesFromEnv(env)) },
      close: async () => client.destroy(),
    };
  }
  const settings = localDynamoSettings(env);
  const dynamo = await connectDynamo(
    env.DYNAMODB_ENDPOINT ? { endpoint: env.DYNAMODB_ENDPOINT } : await settings.connectOptions(),
  );
  const client = localClient(dynamo.endpoint);
  const tables = env[TABLE_ENV.keys] ? tableNamesFromEnv(env) : localTableNames();
  await ensureTables(client, tables);
  return {
    ctx: { store: new DynamoStore(client, tables) },
    close: async () => {
      client.destroy();
      await dynamo.stop();
    },
  };
}

/** Where the CLI writes: standard output and standard error, one call per printed block. */
export interface CliOutput {
  out(text: string): void;
  err(text: string): void;
}

const CONSOLE: CliOutput = { out: (text) => console.log(text), err: (text) => console.error(text) };

/** Runs the CLI; returns the exit code. */
export async function main(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  output: CliOutput = CONSOLE,
): Promise<number> {
  let parsed: Parsed;
  try {
    parsed = parseCommandLine(argv);
    if (parsed.values.help) {
      output.out(USAGE);
      return 0;
    }
    const [group] = parsed.positionals;
    // `holds` and `reconcile` stand alone (every account); every other command names its verb or object.
    if (!group || (parsed.positionals.length < 2 && group !== 'reconcile' && group !== 'holds'))
      throw new UsageError('no command given');
  } catch (error) {
    output.err(`${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  let opened: Awaited<ReturnType<typeof openContext>> | undefined;
  try {
    opened = await openContext(env);
    const result = await runCommand(opened.ctx, parsed);
    output.out(parsed.values.json && !result.raw ? JSON.stringify(result.json) : result.text);
    return result.exitCode ?? 0;
  } catch (error) {
    if (error instanceof UsageError) {
      output.err(`${error.message}\n\n${USAGE}`);
      return 2;
    }
    // An operator's mistake (an unknown account, a bad amount), a missing Java, a failure: one line.
    output.err(`error: ${(error as Error).message}`);
    return 1;
  } finally {
    await opened?.close();
  }
}

/**
 * `bill-logged <file|->`: the completions function logs each generation's usage record (`generation
 * usage`) before its settlement; one that died before the write leaves the record and no ledger entry.
 * This bills those, once (lib/admin/usage-records.ts). The input is the functions' log lines or a
 * CloudWatch Logs Insights result document; `-` reads standard input.
 */
async function billLoggedCommand(ctx: AdminContext, p: string[]): Promise<CliResult> {
  if (p.length !== 2) throw new UsageError('bill-logged takes one file (or - for standard input)');
  const source = p[1] ?? '';
  let text: string;
  try {
    text = source === '-' ? readFileSync(0, 'utf8') : readFileSync(source, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read ${source}: ${(error as Error).message}`);
  }
  const result = await billLoggedGenerations(ctx.store, text);
  return {
    json: { ...result },
    text: [
      `billed ${result.settled.length} generation(s) that had no ledger entry${result.settled.length ? `: ${result.settled.join(', ')}` : ''}`,
      `${result.alreadySettled.length} already on the ledger`,
      ...(result.invalid ? [`${result.invalid} usage record(s) failed their checks and were skipped`] : []),
    ].join('\n'),
  };
}
