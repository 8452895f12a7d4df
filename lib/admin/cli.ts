import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoStore, tableNamesFromEnv } from '../../functions/adapters/dynamodb/index.js';
import { nanoToUsd } from '../../functions/core/money.js';
import { TRANSFER_DELAY_MS } from '../../functions/core/store.js';
import { keyDailyCapsOn } from '../../functions/shared/env.js';
import {
  ensureDashboardTable,
  ensureTables,
  ensureTeamTables,
  localClient,
} from '../local/dynamodb-local.js';
import { localDynamoSettings } from '../local/settings.js';
import { connectDynamo, localTableNames } from '../local/stack.js';
import {
  AUDIT_TABLE_ENV,
  DASHBOARD_TABLE_ENV,
  LOCAL_AUDIT_TABLE_NAME,
  LOCAL_DASHBOARD_TABLE_NAME,
  LOCAL_TEAM_TABLE_NAME,
  TABLE_ENV,
  TEAM_TABLE_ENV,
} from '../tables.js';
import { toCsv } from './csv.js';
import { dashboardEmails } from './emails.js';
import {
  type AccountView,
  type AdminContext,
  accountEmails,
  accountView,
  addCredits,
  checkAccountId,
  createAccount,
  createKey,
  dollars,
  findAccountsByEmail,
  listAccounts,
  listHolds,
  listKeys,
  listLedger,
  MAX_AMOUNT_USD,
  reconcile,
  removeCredits,
  revokeKey,
  setAccountStatus,
  setKeyDailyCap,
  splitAccount,
} from './operations.js';
import { columns, jsonText, printable, terminalSafe as safe } from './terminal.js';
import { billLoggedGenerations } from './usage-records.js';

const USAGE = `usage: npm run --silent admin -- <command> [--json]

  account create <accountId> [--credits <usd>]
  account show <accountId>
  account list [--limit <n>] [--after <next>]   a page of accounts (100, or n up to 1000), with each one's
                                                e-mail (its dashboard user's); then the next
  account find <email>   the accounts of a dashboard user's e-mail address (any case)
  account suspend <accountId>
  account ban <accountId>
  account reinstate <accountId>
  account split <accountId> --slices <n>   spread a busy account's balance over n items (1-62, never fewer)
  credits add <accountId> <usd> --ref <reference>
  credits remove <accountId> <usd> --ref <reference> [--force]   take credit back (refund, correction)
  key create <accountId> --name <label> [--daily-cap-usd <usd>]
  key cap <keyId> --usd <usd> | --none   a key's daily spend cap (resets at 00:00 UTC), or none;
                                         caps only with KEY_DAILY_CAPS=on (the stack's -c keyDailyCaps=true)
  key revoke <keyId>
  key list <accountId>
  usage <accountId> [--since <iso time>] [--format json|csv] [--by key|user|day]
  holds [<accountId>]
  reconcile [<accountId>]
  bill-logged <file|->   bill the generations whose logged usage record has no ledger entry

Amounts are USD with at most 9 decimals, at most $${MAX_AMOUNT_USD} a command. JSON (--json, --format json)
gives every amount as an exact decimal string ("12.5"): a JSON number would round a large one.

E-mail addresses are read from the dashboard's table: DASHBOARD_TABLE (the stack output
DashboardTableName), locally the local stack's.

Environment: DYNAMODB_ENDPOINT (a running DynamoDB), else DynamoDB Local on DYNAMODB_LOCAL_PORT
(default 8000) with its data under SVC_DATA_DIR (default .data), started for the command if it is
not running. With KEYS_TABLE, ACCOUNTS_TABLE, LEDGER_TABLE, HOLDS_TABLE and AUDIT_TABLE set and no
DYNAMODB_ENDPOINT, the deployed tables in AWS (credentials and region from the environment). Credit
added or taken back and keys made, capped or revoked are written with an entry of the account's
audit log (actor operator, your user name).`;

/** The commands there are: each group's verbs, and the commands that take no verb (none: no verb). */
const COMMANDS: Readonly<Record<string, readonly string[]>> = {
  account: ['create', 'show', 'list', 'find', 'suspend', 'ban', 'reinstate', 'split'],
  credits: ['add', 'remove'],
  key: ['create', 'cap', 'revoke', 'list'],
  usage: [],
  holds: [],
  reconcile: [],
  'bill-logged': [],
};

const listed = (names: readonly string[]): string => names.join(', ');

/**
 * Refuses, before anything is opened, a command line that names no command or one there is not: the
 * message says which, and names the commands (or the group's verbs) there are.
 */
function checkCommand(positionals: string[]): void {
  const [group, verb] = positionals;
  if (group === undefined) throw new UsageError('no command given');
  const verbs = Object.hasOwn(COMMANDS, group) ? COMMANDS[group] : undefined;
  if (verbs === undefined)
    throw new UsageError(`unknown command "${group}": the commands are ${listed(Object.keys(COMMANDS))}`);
  if (verbs.length === 0) return;
  if (verb === undefined) throw new UsageError(`"${group}" needs a command: ${listed(verbs)}`);
  if (!verbs.includes(verb))
    throw new UsageError(`unknown command "${group} ${verb}": ${group} takes ${listed(verbs)}`);
}

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
  /** Said on standard error, the command still done (a key created on a suspended account). */
  warnings?: string[];
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
    force?: boolean;
    limit?: string;
    after?: string;
    'daily-cap-usd'?: string;
    usd?: string;
    none?: boolean;
    help?: boolean;
  };
}

type Flag = Exclude<keyof Parsed['values'], 'json' | 'help'>;

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
        force: { type: 'boolean' },
        limit: { type: 'string' },
        after: { type: 'string' },
        'daily-cap-usd': { type: 'string' },
        usd: { type: 'string' },
        none: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    return { positionals, values };
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/** Refuses a flag the command does not take (--json applies to every command). */
function onlyFlags(command: string, values: Parsed['values'], allowed: readonly Flag[]): void {
  for (const [flag, value] of Object.entries(values)) {
    if (value !== undefined && flag !== 'json' && flag !== 'help' && !allowed.includes(flag as Flag))
      throw new UsageError(`--${flag} does not apply to "${command}"`);
  }
}

function expectArgs(
  positionals: string[],
  count: number,
  allowed: readonly Flag[],
  values: Parsed['values'],
): void {
  const command = positionals.slice(0, 2).join(' ');
  if (positionals.length !== count)
    throw new UsageError(`expected ${count - 2} argument(s) after "${command}"`);
  onlyFlags(command, values, allowed);
}

const usdOf = (nano: bigint): string => dollars(nanoToUsd(nano));

const accountLine = (a: AccountView): string =>
  `${a.accountId}  status=${a.status}  creditBalance=${dollars(a.creditBalance)}  held=${dollars(a.held)}  slices=${a.slices}`;

/** An account's view as the result (`json` is the view itself, amounts exact strings). */
const viewResult = (account: AccountView, text: string, extra: Record<string, unknown> = {}): CliResult => ({
  json: { ...account, ...extra },
  text,
});

export async function runCommand(ctx: AdminContext, parsed: Parsed): Promise<CliResult> {
  const { positionals: p, values } = parsed;
  const [group, verb] = p;
  const arg = p[2] ?? '';
  if (group === 'usage') return usageCommand(ctx, p, values);
  if (group === 'reconcile') return reconcileCommand(ctx, p, values);
  if (group === 'holds') return holdsCommand(ctx, p, values);
  if (group === 'bill-logged') return billLoggedCommand(ctx, p, values);
  const command = `${group ?? ''} ${verb ?? ''}`;
  switch (command) {
    case 'account create': {
      expectArgs(p, 3, ['credits'], values);
      const account = await createAccount(ctx, checkAccountId(arg), values.credits);
      return viewResult(
        account,
        `created account ${account.accountId} with ${dollars(account.creditBalance)} of credits`,
      );
    }
    case 'account show': {
      expectArgs(p, 3, [], values);
      const account = await accountView(ctx, checkAccountId(arg));
      return viewResult(account, accountLine(account));
    }
    case 'account list': {
      expectArgs(p, 2, ['limit', 'after'], values);
      return accountListCommand(ctx, values);
    }
    case 'account find': {
      expectArgs(p, 3, [], values);
      const accounts = await findAccountsByEmail(ctx, arg);
      if (accounts.length === 0) throw new Error(`no account has the e-mail address ${arg}`);
      return {
        json: { email: arg, accounts },
        text: accountTable(accounts.map((a) => ({ ...a, email: a.emails.join(', ') }))),
      };
    }
    case 'account split': {
      expectArgs(p, 3, ['slices'], values);
      const { before, ...account } = await splitAccount(ctx, checkAccountId(arg), values.slices);
      return viewResult(
        account,
        before === account.slices
          ? `account ${account.accountId} already has ${account.slices} slices; creditBalance=${dollars(account.creditBalance)}`
          : `account ${account.accountId} is split into ${account.slices} slices (had ${before}); creditBalance=${dollars(account.creditBalance)}; ` +
              `its credit moves to the new slices from ${new Date(Date.now() + TRANSFER_DELAY_MS).toISOString()} ` +
              '(once every request admitted before the split has ended; the sweeper moves it)',
      );
    }
    case 'account suspend':
    case 'account ban':
    case 'account reinstate': {
      expectArgs(p, 3, [], values);
      const status = verb === 'suspend' ? 'suspended' : verb === 'ban' ? 'banned' : 'active';
      const account = await setAccountStatus(ctx, checkAccountId(arg), status);
      return viewResult(account, `account ${account.accountId} is now ${account.status}`);
    }
    case 'credits add': {
      expectArgs(p, 4, ['ref'], values);
      if (!values.ref) throw new UsageError('credits add needs --ref <reference> (the payment reference)');
      const { applied, amountNano, account } = await addCredits(
        ctx,
        checkAccountId(arg),
        p[3] ?? '',
        values.ref,
      );
      const balance = `creditBalance=${dollars(account.creditBalance)}`;
      return viewResult(
        account,
        applied
          ? `added ${usdOf(amountNano)} to ${account.accountId} (ref ${values.ref}); ${balance}`
          : `reference ${values.ref} was already applied; nothing added; ${balance}`,
        { applied, amount: nanoToUsd(amountNano), reference: values.ref },
      );
    }
    case 'credits remove': {
      expectArgs(p, 4, ['ref', 'force'], values);
      if (!values.ref)
        throw new UsageError('credits remove needs --ref <reference> (the refund or correction reference)');
      const force = values.force === true;
      const { applied, amountNano, account } = await removeCredits(
        ctx,
        checkAccountId(arg),
        p[3] ?? '',
        values.ref,
        { force },
      );
      const balance = `creditBalance=${dollars(account.creditBalance)}`;
      return {
        ...viewResult(
          account,
          applied
            ? `took ${usdOf(amountNano)} back from ${account.accountId} (ref ${values.ref}, ledger entry correction#${values.ref}); ${balance}`
            : `reference ${values.ref} was already applied; nothing taken; ${balance}`,
          { applied, amount: nanoToUsd(amountNano), reference: values.ref, forced: force },
        ),
        ...(applied && account.creditBalance.startsWith('-')
          ? { warnings: [`${account.accountId}'s balance is below zero: ${dollars(account.creditBalance)}`] }
          : {}),
      };
    }
    case 'key create': {
      expectArgs(p, 3, ['name', 'daily-cap-usd'], values);
      if (!values.name) throw new UsageError('key create needs --name <label>');
      const { status } = await accountView(ctx, checkAccountId(arg));
      const dailyCapUsd = values['daily-cap-usd'];
      const created = await createKey(
        ctx,
        arg,
        values.name,
        dailyCapUsd === undefined ? {} : { dailyCapUsd },
      );
      const capText = created.dailyCap
        ? `, daily spend cap ${dollars(created.dailyCap)} (resets at 00:00 UTC)`
        : '';
      return {
        json: { ...created, accountStatus: status },
        text: `created key ${created.keyId} ("${safe(created.name)}") for ${created.accountId}${capText}.\nThis is the only time the key is shown; store it now:\n\n  ${created.key}\n`,
        // Created all the same: it serves once the account is reinstated.
        ...(status !== 'active'
          ? {
              warnings: [
                `account ${created.accountId} is ${status}: this key is refused (403) until the account is reinstated`,
              ],
            }
          : {}),
      };
    }
    case 'key cap': {
      expectArgs(p, 3, ['usd', 'none'], values);
      if ((values.usd === undefined) === (values.none !== true))
        throw new UsageError('key cap needs --usd <usd> (a daily spend cap) or --none (no cap), one of them');
      const key = await setKeyDailyCap(ctx, arg, values.usd);
      return {
        json: { ...key },
        text: key.dailyCap
          ? `key ${key.keyId}'s daily spend cap is ${dollars(key.dailyCap)} (resets at 00:00 UTC)`
          : `key ${key.keyId} has no daily spend cap`,
      };
    }
    case 'key revoke': {
      expectArgs(p, 3, [], values);
      const key = await revokeKey(ctx, arg);
      return { json: { ...key }, text: `revoked key ${key.keyId}` };
    }
    case 'key list': {
      expectArgs(p, 3, [], values);
      const keys = await listKeys(ctx, checkAccountId(arg));
      // A daily cap column only when a key has one.
      const capped = keys.some((k) => k.dailyCap !== undefined);
      const rows = keys.map((k) => [
        k.keyId,
        safe(k.name),
        k.displayPrefix,
        k.status,
        k.createdAt,
        ...(capped ? [k.dailyCap ? dollars(k.dailyCap) : '-'] : []),
      ]);
      return {
        json: { accountId: arg, keys },
        text: rows.length
          ? columns([
              ['id', 'name', 'prefix', 'status', 'created', ...(capped ? ['daily cap'] : [])],
              ...rows,
            ])
          : `no keys for ${arg}`,
      };
    }
    default:
      throw new UsageError(group ? `unknown command "${p.join(' ')}"` : 'no command given');
  }
}

/** An `account list --after` value: a previous page's `next`, an account or a slice item id. */
const PAGE_KEY = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}(#\d{1,2})?$/;

/** `account list [--limit <n>] [--after <next>]`: one page of accounts, in the table's order. */
async function accountListCommand(ctx: AdminContext, values: Parsed['values']): Promise<CliResult> {
  const limit = values.limit === undefined ? 100 : Number(values.limit);
  if (!/^\d+$/.test(values.limit ?? '100') || limit < 1 || limit > 1000)
    throw new UsageError('--limit must be a whole number from 1 to 1000');
  if (values.after !== undefined && !PAGE_KEY.test(values.after))
    throw new UsageError(`--after takes the "next" of a previous page, not "${values.after}"`);
  const page = await listAccounts(ctx, { limit, ...(values.after ? { after: values.after } : {}) });
  // The e-mail column where the dashboard's table is known; without it, a warning says how.
  const emails = ctx.emails ? await accountEmails(ctx) : undefined;
  const accounts = page.accounts.map((a) => ({
    ...a,
    ...(emails ? { emails: emails.get(a.accountId) ?? [] } : {}),
  }));
  const lines = [
    accounts.length
      ? accountTable(accounts.map((a) => ({ ...a, ...(a.emails ? { email: a.emails.join(', ') } : {}) })))
      : 'no accounts',
  ];
  if (page.next)
    lines.push(`more: account list --after ${page.next}${values.limit ? ` --limit ${limit}` : ''}`);
  return {
    json: { accounts, next: page.next ?? null },
    text: lines.join('\n'),
    ...(emails
      ? {}
      : {
          warnings: [
            'e-mail addresses are not shown: set DASHBOARD_TABLE (the stack output DashboardTableName) to see them',
          ],
        }),
  };
}

/** Accounts as a table: a header, then a row each; the e-mail column where the rows have one ("-": none). */
function accountTable(accounts: (AccountView & { createdAt?: string; email?: string })[]): string {
  const withEmail = accounts.some((a) => a.email !== undefined);
  return columns([
    ['accountId', ...(withEmail ? ['email'] : []), 'status', 'creditBalance', 'held', 'slices', 'created'],
    ...accounts.map((a) => [
      a.accountId,
      ...(withEmail ? [a.email ? safe(a.email) : '-'] : []),
      a.status,
      dollars(a.creditBalance),
      dollars(a.held),
      String(a.slices),
      a.createdAt ?? '',
    ]),
  ]);
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

/**
 * `usage <accountId> [--since <iso>] [--format json|csv]`: the account's ledger, oldest first. A field
 * that does not apply to an entry (a top-up's tokens, a charge's reference) is null in JSON, empty in CSV.
 */
async function usageCommand(ctx: AdminContext, p: string[], values: Parsed['values']): Promise<CliResult> {
  if (p.length !== 2) throw new UsageError('usage takes one account id');
  onlyFlags('usage', values, ['since', 'format', 'by']);
  const format = values.format ?? (values.json ? 'json' : 'table');
  if (!['json', 'csv', 'table'].includes(format)) throw new UsageError('--format must be json or csv');
  let since: string | undefined;
  if (values.since !== undefined) {
    const time = new Date(values.since);
    if (Number.isNaN(time.getTime()))
      throw new UsageError(`--since must be an ISO time, got "${values.since}"`);
    since = time.toISOString();
  }
  const accountId = (await accountView(ctx, checkAccountId(p[1] ?? ''))).accountId; // throws for an unknown account
  const entries = (await listLedger(ctx, accountId)).filter(
    (entry) => since === undefined || entry.createdAt >= since,
  );
  if (values.by !== undefined) return usageSummary(ctx, accountId, entries, values.by, format);
  const rows = entries.map((entry) => ({
    time: entry.createdAt,
    entryId: entry.entryId,
    type: entry.type,
    tier: entry.tier ?? null,
    keyId: entry.keyId ?? null,
    user: entry.user ?? null,
    promptTokens: entry.promptTokens ?? null,
    completionTokens: entry.completionTokens ?? null,
    cachedTokens: entry.cachedTokens ?? null,
    amountUsd: nanoToUsd(entry.deltaNano),
    estimated: entry.type === 'charge' ? Boolean(entry.estimated) : null,
    reference: entry.reference ?? null,
  }));
  const json = { accountId, entries: rows };
  if (format === 'csv') return { json, text: toCsv(CSV_COLUMNS, rows), raw: true };
  if (format === 'json') return { json, text: jsonText(json), raw: true };
  const lines = rows.map(
    (row) =>
      `${row.time}  ${row.type.padEnd(10)}  ${row.amountUsd.padStart(18)}  ${safe(row.entryId)}  ${safe(row.tier ?? '')} ${row.type === 'charge' ? `${row.promptTokens}+${row.completionTokens} tokens${row.estimated ? ' (estimated)' : ''}` : ''}`,
  );
  return { json, text: lines.length ? lines.join('\n') : `no ledger entries for ${accountId}` };
}

/**
 * `usage --by key|user|day`: the charges summed per API key (with its name), per end user (the
 * request's `user`), or per UTC day: requests, tokens and cost, exact (summed in nano-USD).
 */
async function usageSummary(
  ctx: AdminContext,
  accountId: string,
  entries: Awaited<ReturnType<typeof listLedger>>,
  by: string,
  format: string,
): Promise<CliResult> {
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
  const names =
    by === 'key' ? new Map((await listKeys(ctx, accountId)).map((key) => [key.keyId, key.name])) : undefined;
  const sums = [...groups.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([group, sum]) => ({
      group,
      name: names?.get(group) ?? null,
      ...sum,
      costUsd: nanoToUsd(sum.costNano),
    }));
  const rows = sums.map((sum) => ({
    [by]: sum.group === '' ? null : sum.group,
    ...(names ? { name: sum.name } : {}),
    requests: sum.requests,
    promptTokens: sum.promptTokens,
    completionTokens: sum.completionTokens,
    costUsd: sum.costUsd,
  }));
  const json = { accountId, by, groups: rows };
  if (format === 'json') return { json, text: jsonText(json), raw: true };
  if (format === 'csv')
    return {
      json,
      text: toCsv(
        [by, ...(names ? ['name'] : []), 'requests', 'promptTokens', 'completionTokens', 'costUsd'],
        rows,
      ),
      raw: true,
    };
  const labels = sums.map(({ group, name }) => {
    const label = safe(group) || '(none)';
    return names ? `${label}  ${name === null ? '(no such key)' : safe(name)}` : label;
  });
  const width = Math.max(24, ...labels.map((label) => label.length));
  const lines = sums.map(
    (sum, i) =>
      `${(labels[i] ?? '').padEnd(width)}  ${String(sum.requests).padStart(6)} requests  ${sum.promptTokens}+${sum.completionTokens} tokens  $${sum.costUsd}`,
  );
  return { json, text: lines.length ? lines.join('\n') : `no charges for ${accountId}` };
}

/**
 * `reconcile [<accountId>]`: creditBalance must equal the ledger's sum (top-ups minus corrections minus
 * charges), for every account.
 */
async function reconcileCommand(
  ctx: AdminContext,
  p: string[],
  values: Parsed['values'],
): Promise<CliResult> {
  if (p.length > 2) throw new UsageError('reconcile takes at most one account id');
  onlyFlags('reconcile', values, []);
  const results = await reconcile(ctx, p[1] === undefined ? undefined : checkAccountId(p[1]));
  const differences = results.filter((r) => r.differenceNano !== 0n);
  const json = {
    accounts: results.length,
    differences: differences.length,
    results: results.map((r) => ({
      accountId: r.accountId,
      creditBalance: nanoToUsd(r.balanceNano),
      ledgerBalance: nanoToUsd(r.ledgerNano),
      difference: nanoToUsd(r.differenceNano),
      held: nanoToUsd(r.heldNano),
      holds: nanoToUsd(r.holdsNano),
      entries: r.entries,
    })),
  };
  const lines = results.map(
    (r) =>
      `${r.differenceNano === 0n ? 'ok  ' : 'DIFF'}  ${safe(r.accountId)}  creditBalance=${usdOf(r.balanceNano)}  ledger=${usdOf(r.ledgerNano)}  held=${usdOf(r.heldNano)}  holds=${usdOf(r.holdsNano)}  difference=${usdOf(r.differenceNano)}  (${r.entries} entries)`,
  );
  lines.push(`${results.length} account(s) checked, ${differences.length} with a difference`);
  return { json, text: lines.join('\n'), exitCode: differences.length > 0 ? 1 : 0 };
}

/** `holds [<accountId>]`: live and expired (not yet swept) holds, soonest expiry first. */
async function holdsCommand(ctx: AdminContext, p: string[], values: Parsed['values']): Promise<CliResult> {
  if (p.length > 2) throw new UsageError('holds takes at most one account id');
  onlyFlags('holds', values, []);
  const holds = await listHolds(ctx, p[1] === undefined ? undefined : checkAccountId(p[1]));
  const json = {
    holds: holds.map((h) => ({
      accountId: h.accountId,
      holdId: h.holdId,
      amountUsd: nanoToUsd(h.amountNano),
      createdAt: h.createdAt,
      expiresAt: h.expiresAt,
      expired: h.expired,
    })),
  };
  const lines = holds.map(
    (h) =>
      `${h.expired ? 'EXPIRED' : 'live   '}  ${safe(h.accountId)}  ${safe(h.holdId)}  ${usdOf(h.amountNano)}  expires ${h.expiresAt}`,
  );
  return { json, text: lines.length ? lines.join('\n') : 'no holds' };
}

/** Who runs the CLI, as the audit log names them: their user name. */
const operatorOf = (env: NodeJS.ProcessEnv): { operator?: string } =>
  env.USER || env.USERNAME ? { operator: (env.USER || env.USERNAME) as string } : {};

/** Where the CLI's tables are: the deployed ones, a given endpoint, or DynamoDB Local on the data directory. */
async function openContext(
  env: NodeJS.ProcessEnv,
): Promise<{ ctx: AdminContext; close: () => Promise<void> }> {
  const deployed =
    !env.DYNAMODB_ENDPOINT && env[TABLE_ENV.keys] && env[TABLE_ENV.accounts] && env[TABLE_ENV.ledger];
  if (deployed) {
    if (!env[TABLE_ENV.holds])
      throw new UsageError(`set ${TABLE_ENV.holds} too (the stack output HoldsTableName)`);
    // The operator's changes are written with their audit entries: the log's table must be known.
    if (!env[AUDIT_TABLE_ENV])
      throw new UsageError(`set ${AUDIT_TABLE_ENV} too (the stack output AuditTableName)`);
    const client = new DynamoDBClient({});
    const dashboardTable = env[DASHBOARD_TABLE_ENV];
    return {
      ctx: {
        store: new DynamoStore(client, {
          ...tableNamesFromEnv(env),
          audit: env[AUDIT_TABLE_ENV],
          ...(env[TEAM_TABLE_ENV] ? { team: env[TEAM_TABLE_ENV] } : {}),
        }),
        keyDailyCaps: keyDailyCapsOn(env),
        ...operatorOf(env),
        ...(dashboardTable ? { emails: dashboardEmails(client, dashboardTable) } : {}),
      },
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
  // The local stack's dashboard table (lib/local/stack.ts), or the one named.
  const dashboardTable = env[DASHBOARD_TABLE_ENV] || LOCAL_DASHBOARD_TABLE_NAME;
  await ensureDashboardTable(client, dashboardTable);
  // The team's and the audit log's (found by the store as a function finds them, by their environment).
  const teamTables = {
    team: env[TEAM_TABLE_ENV] || LOCAL_TEAM_TABLE_NAME,
    audit: env[AUDIT_TABLE_ENV] || LOCAL_AUDIT_TABLE_NAME,
  };
  await ensureTeamTables(client, teamTables);
  return {
    ctx: {
      store: new DynamoStore(client, { ...tables, ...teamTables }),
      keyDailyCaps: keyDailyCapsOn(env),
      ...operatorOf(env),
      emails: dashboardEmails(client, dashboardTable),
    },
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

/**
 * The one way the CLI prints: every block, on either stream, through `printable` (terminal.ts), so no
 * control character in an argument or a stored value reaches the terminal raw. An error is one line:
 * its message escaped whole, line breaks included (`usage $'x\ny'` cannot add a line of its own).
 */
function printer(output: CliOutput) {
  return {
    out: (text: string) => output.out(printable(text)),
    err: (text: string) => output.err(printable(text)),
    error: (message: string) => output.err(printable(`error: ${safe(message)}`)),
    usage: (message: string) => output.err(printable(`${safe(message)}\n\n${USAGE}`)),
  };
}

/** Runs the CLI; returns the exit code. */
export async function main(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  output: CliOutput = CONSOLE,
): Promise<number> {
  const print = printer(output);
  let parsed: Parsed;
  try {
    parsed = parseCommandLine(argv);
    if (parsed.values.help) {
      print.out(USAGE);
      return 0;
    }
    checkCommand(parsed.positionals);
  } catch (error) {
    print.usage((error as Error).message);
    return 2;
  }
  let opened: Awaited<ReturnType<typeof openContext>> | undefined;
  try {
    opened = await openContext(env);
    const result = await runCommand(opened.ctx, parsed);
    for (const warning of result.warnings ?? []) print.err(`warning: ${safe(warning)}`);
    print.out(parsed.values.json && !result.raw ? jsonText(result.json) : result.text);
    return result.exitCode ?? 0;
  } catch (error) {
    if (error instanceof UsageError) {
      print.usage(error.message);
      return 2;
    }
    // An operator's mistake (an unknown account, a bad amount), a missing Java, a failure: one line.
    print.error((error as Error).message);
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
async function billLoggedCommand(
  ctx: AdminContext,
  p: string[],
  values: Parsed['values'],
): Promise<CliResult> {
  if (p.length !== 2) throw new UsageError('bill-logged takes one file (or - for standard input)');
  onlyFlags('bill-logged', values, []);
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
      `billed ${result.settled.length} generation(s) that had no ledger entry${result.settled.length ? `: ${result.settled.map(safe).join(', ')}` : ''}`,
      `${result.alreadySettled.length} already on the ledger`,
      ...(result.invalid ? [`${result.invalid} usage record(s) failed their checks and were skipped`] : []),
    ].join('\n'),
  };
}
