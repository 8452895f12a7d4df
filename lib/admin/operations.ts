/**
 * The operator's operations on accounts, credits, keys, the ledger and holds: validation and views
 * over the store port (core/store.ts), which alone knows the tables. Every balance change is a
 * transaction that also writes its ledger entry, so `creditBalance` always equals top-ups minus
 * corrections minus charges. Amounts are exact: nano-USD bigints, or USD decimal strings in the views
 * (a JavaScript number keeps about 16 significant digits, fewer than a large balance to the nano).
 */

import type { AccountStatus } from '../../functions/core/access.js';
import { keyNameProblem, newApiKey } from '../../functions/core/keys.js';
import { nanoToUsd, usdToNano } from '../../functions/core/money.js';
import {
  AccountExistsError,
  AccountNotFoundError,
  type AccountRecord,
  type Hold,
  type KeyRecord,
  type LedgerEntry,
  MAX_SLICES,
  type Store,
} from '../../functions/core/store.js';
import { type AuditAction, type AuditEntry, auditEntry } from '../../functions/core/team.js';
import { KEY_DAILY_CAPS_OFF } from '../../functions/shared/env.js';

import { type AccountEmails, type EmailDirectory, sameAddress } from './emails.js';

export type { LedgerEntry };

class AdminError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AdminError';
  }
}

/** The operator works through the same store port as the functions. */
export interface AdminContext {
  store: Store;
  /** The dashboard's customers' e-mail addresses (emails.ts); absent where its table is not known. */
  emails?: EmailDirectory;
  /**
   * Per-key daily caps on (KEY_DAILY_CAPS=on in the admin's environment, functions/shared/env.ts). Off
   * or absent (the default): a cap is neither set nor shown, and a stored one is left as it is.
   */
  keyDailyCaps?: boolean;
  /** Who runs the CLI (their user name), for the audit entries of what they change. */
  operator?: string;
}

/**
 * The audit entry of an operator's change to a customer's account (credit added or taken back, a key
 * made, capped or revoked), written with it: the customer's log shows what the operator did.
 */
function byOperator(
  ctx: AdminContext,
  accountId: string,
  action: AuditAction,
  more: Pick<AuditEntry, 'target' | 'details'>,
): { audit: AuditEntry } {
  const actor = { kind: 'operator' as const, ...(ctx.operator ? { subject: ctx.operator } : {}) };
  return { audit: auditEntry(accountId, actor, action, new Date().toISOString(), more) };
}

/** Refuses a cap while per-key daily caps are off, in one line naming the setting that turns them on. */
function requireKeyDailyCaps(ctx: AdminContext): void {
  if (!ctx.keyDailyCaps) throw new AdminError(KEY_DAILY_CAPS_OFF);
}

/** An account as the CLI shows it: amounts as exact USD decimal strings. */
export interface AccountView {
  accountId: string;
  status: AccountStatus;
  /** USD, exact ("12345678.123456789"). */
  creditBalance: string;
  /** USD held by requests in flight, exact. */
  held: string;
  /** How many slices its balance is split into (1: never split). */
  slices: number;
}

/**
 * The most one command adds or takes back, and the most an account starts with: a typo of a few
 * digits is refused before anything is written. A larger payment is several references.
 */
export const MAX_AMOUNT_USD = 1_000_000;
const MAX_AMOUNT_NANO = usdToNano(String(MAX_AMOUNT_USD));

export interface KeyView {
  keyId: string;
  name: string;
  displayPrefix: string;
  status: string;
  createdAt: string;
  revokedAt?: string;
  /** The key's daily spend cap, an exact USD decimal string (core/store.ts "KEY DAILY CAPS"); absent: none. */
  dailyCap?: string;
}

/** A USD decimal string for a person: `$12.5`, `-$3`. */
export const dollars = (usd: string): string => (usd.startsWith('-') ? `-$${usd.slice(1)}` : `$${usd}`);

const ACCOUNT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const KEY_ID = /^key_[0-9A-Za-z]{1,64}$/;

export function checkAccountId(accountId: string): string {
  if (!ACCOUNT_ID.test(accountId))
    throw new AdminError(`invalid account id "${accountId}": use 1-64 letters, digits, ".", "_" or "-"`);
  return accountId;
}

/** A positive USD amount up to MAX_AMOUNT_USD (or 0, when `zero` allows it) with at most 9 decimals, as nano-USD. */
function parseCredits(usd: string, zero: 'allowed' | 'refused' = 'refused'): bigint {
  if (!/^\d+(\.\d{1,9})?$/.test(usd))
    throw new AdminError(`invalid amount "${usd}": a positive USD amount like 5 or 12.50`);
  // Digits before the point are counted before any arithmetic: no number is built from a long typo.
  const whole = (usd.split('.')[0] ?? '').replace(/^0+/, '');
  const nano = whole.length > String(MAX_AMOUNT_USD).length ? undefined : usdToNano(usd);
  if (nano === undefined || nano > MAX_AMOUNT_NANO)
    throw new AdminError(
      `amount $${usd} is above the maximum of $${MAX_AMOUNT_USD} a command; split a larger one over several references`,
    );
  if (nano === 0n && zero === 'allowed') return nano;
  if (nano <= 0n) throw new AdminError('the amount must be greater than 0');
  return nano;
}

export async function createAccount(
  ctx: AdminContext,
  accountId: string,
  creditsUsd?: string,
): Promise<AccountView> {
  checkAccountId(accountId);
  // `--credits 0` is the same $0 account as no --credits.
  const credits = creditsUsd === undefined ? 0n : parseCredits(creditsUsd, 'allowed');
  try {
    await ctx.store.createAccount(accountId, credits, new Date().toISOString());
  } catch (error) {
    if (error instanceof AccountExistsError) throw new AdminError(`account ${accountId} already exists`);
    throw error;
  }
  return { accountId, status: 'active', creditBalance: nanoToUsd(credits), held: '0', slices: 1 };
}

export async function getAccount(
  ctx: AdminContext,
  accountId: string,
): Promise<
  | { accountId: string; status: AccountStatus; balanceNano: bigint; heldNano: bigint; slices: number }
  | undefined
> {
  const account = await ctx.store.getAccount(accountId);
  if (!account) return undefined;
  const { status, balanceNano, heldNano, slices } = account;
  return { accountId, status, balanceNano, heldNano, slices };
}

const toView = (account: Omit<AccountRecord, 'createdAt'>): AccountView => ({
  accountId: account.accountId,
  status: account.status,
  creditBalance: nanoToUsd(account.balanceNano),
  held: nanoToUsd(account.heldNano),
  slices: account.slices,
});

/** The account, its amounts exact: what the CLI prints. */
export async function accountView(ctx: AdminContext, accountId: string): Promise<AccountView> {
  const account = await getAccount(ctx, accountId);
  if (!account) throw new AdminError(`no such account: ${accountId}`);
  return toView(account);
}

/**
 * The account with its balance as a JavaScript number, as a JSON client reads GET /api/v1/credits:
 * for comparing with that answer. Past about 16 significant digits the number is not the balance;
 * the CLI prints accountView's exact strings.
 */
export async function showAccount(
  ctx: AdminContext,
  accountId: string,
): Promise<{ accountId: string; status: AccountStatus; creditBalance: number }> {
  const { status, creditBalance } = await accountView(ctx, accountId);
  return { accountId, status, creditBalance: Number(creditBalance) };
}

/** Every account, a page at a time (a Scan, in the table's order), each with its total over its slices. */
export async function listAccounts(
  ctx: AdminContext,
  options: { limit: number; after?: string },
): Promise<{ accounts: (AccountView & { createdAt?: string })[]; next?: string }> {
  const page = await ctx.store.listAccounts(options);
  const accounts = [];
  for (const item of page.accounts) {
    // The page has each account item alone; a split account's totals are read over its slices.
    const account = item.slices > 1 ? ((await getAccount(ctx, item.accountId)) ?? item) : item;
    accounts.push({ ...toView(account), ...(item.createdAt ? { createdAt: item.createdAt } : {}) });
  }
  return { accounts, ...(page.next ? { next: page.next } : {}) };
}

/** The addresses of every account, or an error saying where they are when the CLI was not told. */
export function accountEmails(ctx: AdminContext): Promise<AccountEmails> {
  if (!ctx.emails)
    throw new AdminError(
      "the customers' e-mail addresses are in the dashboard table: set DASHBOARD_TABLE (the stack output DashboardTableName)",
    );
  return ctx.emails.accountEmails();
}

/** The accounts with `email` among their addresses (any case), each with all its addresses. */
export async function findAccountsByEmail(
  ctx: AdminContext,
  email: string,
): Promise<(AccountView & { emails: string[] })[]> {
  if (!/^[^\s@]+@[^\s@]+$/.test(email.trim())) throw new AdminError(`"${email}" is not an e-mail address`);
  const found = [];
  for (const [accountId, emails] of await accountEmails(ctx)) {
    if (!emails.some((known) => sameAddress(email, known))) continue;
    const account = await getAccount(ctx, accountId);
    // Linked by a sign-in, then removed from the accounts table: nothing to show.
    if (account) found.push({ ...toView(account), emails });
  }
  return found.sort((a, b) => a.accountId.localeCompare(b.accountId));
}

/**
 * Splits a busy account's balance into `slices` slices (its requests then spread their writes over
 * that many items and partitions) and evens the credit out over them. Never fewer than it has: a
 * smaller count is refused (nothing changes).
 */
export async function splitAccount(
  ctx: AdminContext,
  accountId: string,
  slices: string | undefined,
): Promise<AccountView & { before: number }> {
  const count = Number(slices);
  if (!slices || !/^\d+$/.test(slices) || count < 1 || count > MAX_SLICES)
    throw new AdminError(`--slices must be a whole number from 1 to ${MAX_SLICES}`);
  const before = (await accountView(ctx, accountId)).slices;
  const fewer = (has: number) =>
    new AdminError(
      `account ${accountId} has ${has} slices and slices never decrease: not split into ${count}`,
    );
  if (count < before) throw fewer(before);
  const now = await notFoundAsAdminError(accountId, () => ctx.store.splitAccount(accountId, count));
  // Split further by someone else meanwhile.
  if (now > count) throw fewer(now);
  return { ...(await accountView(ctx, accountId)), before };
}

export async function setAccountStatus(
  ctx: AdminContext,
  accountId: string,
  status: AccountStatus,
): Promise<AccountView> {
  await notFoundAsAdminError(accountId, () =>
    ctx.store.setAccountStatus(accountId, status, new Date().toISOString()),
  );
  return accountView(ctx, accountId);
}

function checkReference(reference: string): string {
  if (!/^[\x21-\x7e]{1,128}$/.test(reference))
    throw new AdminError('the reference must be 1-128 printable characters without spaces');
  return reference;
}

/** Adds credits once per payment reference: the same reference twice adds once. */
export async function addCredits(
  ctx: AdminContext,
  accountId: string,
  usd: string,
  reference: string,
): Promise<{ applied: boolean; amountNano: bigint; account: AccountView }> {
  const amount = parseCredits(usd);
  checkReference(reference);
  const applied = await notFoundAsAdminError(accountId, () =>
    ctx.store.topUp(
      accountId,
      reference,
      amount,
      new Date().toISOString(),
      // Credit given by hand is recorded as a purchase by the operator (its reference says why).
      byOperator(ctx, accountId, 'purchase', {
        target: reference,
        details: { amount: `$${nanoToUsd(amount)}` },
      }),
    ),
  );
  return { applied, amountNano: amount, account: await accountView(ctx, accountId) };
}

/**
 * Takes credit back (a refund by hand, a correction) once per reference: the ledger entry
 * `correction#<reference>` and the deduction in one transaction. Refused, with nothing written, when
 * it would take the account's available credit (balance minus what requests in flight hold) below
 * zero, unless `force`.
 */
export async function removeCredits(
  ctx: AdminContext,
  accountId: string,
  usd: string,
  reference: string,
  { force = false }: { force?: boolean } = {},
): Promise<{ applied: boolean; amountNano: bigint; account: AccountView }> {
  const amount = parseCredits(usd);
  checkReference(reference);
  const outcome = await notFoundAsAdminError(accountId, () =>
    ctx.store.removeCredits(accountId, reference, amount, new Date().toISOString(), {
      force,
      // Credit taken back by hand is recorded as a refund by the operator (its reference says why).
      ...byOperator(ctx, accountId, 'refund', {
        target: reference,
        details: { amount: `$${nanoToUsd(amount)}` },
      }),
    }),
  );
  const account = await accountView(ctx, accountId);
  if (outcome === 'refused')
    throw new AdminError(
      `$${nanoToUsd(amount)} is more than ${accountId}'s available credit (${dollars(account.creditBalance)} less ${dollars(account.held)} held): nothing taken; --force takes it anyway, below zero`,
    );
  return { applied: outcome === 'applied', amountNano: amount, account };
}

export async function createKey(
  ctx: AdminContext,
  accountId: string,
  name: string,
  options: { dailyCapUsd?: string } = {},
): Promise<{ key: string; keyId: string; name: string; accountId: string; dailyCap?: string }> {
  if (options.dailyCapUsd !== undefined) requireKeyDailyCaps(ctx);
  const problem = keyNameProblem(name);
  if (problem) throw new AdminError(problem);
  const cap = options.dailyCapUsd === undefined ? undefined : parseCredits(options.dailyCapUsd);
  const { key, record } = newApiKey(accountId, name, new Date().toISOString());
  // Written with the key item itself: no second write.
  if (cap !== undefined) record.dailyCapNano = cap;
  await notFoundAsAdminError(accountId, () =>
    ctx.store.createKey(
      record,
      byOperator(ctx, accountId, 'key.created', {
        target: record.keyId,
        details: {
          name,
          prefix: record.displayPrefix,
          ...(cap !== undefined ? { cap: `$${nanoToUsd(cap)}` } : {}),
        },
      }),
    ),
  );
  return {
    key,
    keyId: record.keyId,
    name,
    accountId,
    ...(cap !== undefined ? { dailyCap: nanoToUsd(cap) } : {}),
  };
}

/**
 * Sets a key's daily spend cap (USD, reset at 00:00 UTC), or removes it (undefined): one write of its
 * key item (Store.setKeyDailyCap), which its requests read from their next one on.
 */
export async function setKeyDailyCap(
  ctx: AdminContext,
  keyId: string,
  capUsd: string | undefined,
): Promise<KeyView> {
  requireKeyDailyCaps(ctx);
  if (!KEY_ID.test(keyId)) throw new AdminError(`invalid key id "${keyId}": key_ and letters or digits`);
  const cap = capUsd === undefined ? undefined : parseCredits(capUsd);
  const found = await ctx.store.findKeyById(keyId);
  if (!found) throw new AdminError(`no such key: ${keyId}`);
  const details = { cap: cap === undefined ? 'none' : `$${nanoToUsd(cap)}` };
  const audit = byOperator(ctx, found.accountId, 'key.cap_changed', { target: keyId, details });
  return toKeyView(await ctx.store.setKeyDailyCap(found.accountId, keyId, cap, audit), ctx);
}

export async function revokeKey(ctx: AdminContext, keyId: string): Promise<KeyView> {
  if (!KEY_ID.test(keyId)) throw new AdminError(`invalid key id "${keyId}": key_ and letters or digits`);
  const found = await ctx.store.findKeyById(keyId);
  if (!found) throw new AdminError(`no such key: ${keyId}`);
  const audit = byOperator(ctx, found.accountId, 'key.revoked', {
    target: keyId,
    details: { name: found.name },
  });
  return toKeyView(await ctx.store.revokeKey(found.keyHash, new Date().toISOString(), audit), ctx);
}

export async function listKeys(ctx: AdminContext, accountId: string): Promise<KeyView[]> {
  if (!(await getAccount(ctx, accountId))) throw new AdminError(`no such account: ${accountId}`);
  return (await ctx.store.listKeys(accountId)).map((key) => toKeyView(key, ctx));
}

/** A key as the CLI shows it; its daily cap only while caps are on (off, a stored cap is not in force). */
function toKeyView(key: KeyRecord, ctx: AdminContext): KeyView {
  return {
    keyId: key.keyId,
    name: key.name,
    displayPrefix: key.displayPrefix,
    status: key.status,
    createdAt: key.createdAt,
    ...(key.revokedAt ? { revokedAt: key.revokedAt } : {}),
    ...(ctx.keyDailyCaps && key.dailyCapNano !== undefined ? { dailyCap: nanoToUsd(key.dailyCapNano) } : {}),
  };
}

/** Every ledger entry of an account, oldest first. */
export async function listLedger(ctx: AdminContext, accountId: string): Promise<LedgerEntry[]> {
  return ctx.store.listLedger(accountId);
}

export interface HoldView {
  accountId: string;
  holdId: string;
  amountNano: bigint;
  createdAt: string;
  expiresAt: string;
  expired: boolean;
}

/** Live and expired (not yet swept) holds, of one account or of all. */
export async function listHolds(
  ctx: AdminContext,
  accountId?: string,
  now = Date.now(),
): Promise<HoldView[]> {
  if (accountId && !(await getAccount(ctx, accountId))) throw new AdminError(`no such account: ${accountId}`);
  return (await ctx.store.listHolds(accountId)).map((hold: Hold) => ({
    accountId: hold.accountId,
    holdId: hold.holdId,
    amountNano: hold.amountNano,
    createdAt: hold.createdAt,
    expiresAt: new Date(hold.expiresAt).toISOString(),
    expired: hold.expiresAt <= now,
  }));
}

export interface Reconciliation {
  accountId: string;
  /** creditBalance in nano-USD. */
  balanceNano: bigint;
  /** Top-ups minus corrections minus charges in nano-USD. */
  ledgerNano: bigint;
  differenceNano: bigint;
  /** heldNano on the account, and the sum of its hold items: they must agree too. */
  heldNano: bigint;
  holdsNano: bigint;
  entries: number;
}

/**
 * Checks that each account's creditBalance equals the sum of its ledger (top-ups minus corrections
 * minus charges), and that what the
 * account says is held equals its live holds (a held amount no hold explains is a difference). The
 * balance of a split account is its slices as of one instant (store.getAccount): a transfer between
 * them, which moves credit without a ledger entry, is never seen half (a false difference).
 */
export async function reconcile(ctx: AdminContext, accountId?: string): Promise<Reconciliation[]> {
  const accountIds = accountId ? [accountId] : await ctx.store.listAccountIds();
  const results: Reconciliation[] = [];
  for (const id of accountIds) {
    const account = await getAccount(ctx, id);
    if (!account) throw new AdminError(`no such account: ${id}`);
    const entries = await listLedger(ctx, id);
    const ledgerNano = entries.reduce((sum, entry) => sum + entry.deltaNano, 0n);
    const holdsNano = (await ctx.store.listHolds(id)).reduce((sum, hold) => sum + hold.amountNano, 0n);
    results.push({
      accountId: id,
      balanceNano: account.balanceNano,
      ledgerNano,
      differenceNano: account.balanceNano - ledgerNano + (account.heldNano - holdsNano),
      heldNano: account.heldNano,
      holdsNano,
      entries: entries.length,
    });
  }
  return results;
}

async function notFoundAsAdminError<T>(accountId: string, action: () => Promise<T>): Promise<T> {
  try {
    return await action();
  } catch (error) {
    if (error instanceof AccountNotFoundError) throw new AdminError(`no such account: ${accountId}`);
    throw error;
  }
}
