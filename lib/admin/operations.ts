/**
 * The operator's operations on accounts, credits, keys, the ledger and holds: validation and views
 * over the store port (core/store.ts), which alone knows the tables. Every balance change is a
 * transaction that also writes its ledger entry, so `creditBalance` always equals top-ups minus charges.
 */

import { nanoToUsd, usdToNano } from '../../functions/billing/money.js';
import type { AccountStatus } from '../../functions/core/access.js';
import { generateApiKey } from '../../functions/core/auth.js';
import {
  AccountExistsError,
  AccountNotFoundError,
  type Hold,
  type KeyRecord,
  type LedgerEntry,
  MAX_SLICES,
  type Store,
} from '../../functions/core/store.js';

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
}

export interface AccountView {
  accountId: string;
  status: AccountStatus;
  /** USD. */
  creditBalance: number;
  /** USD held by requests in flight, when any. */
  held?: number;
  /** How many slices its balance is split into, when more than one. */
  slices?: number;
}

export interface KeyView {
  keyId: string;
  name: string;
  displayPrefix: string;
  status: string;
  createdAt: string;
  revokedAt?: string;
}

const ACCOUNT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export function checkAccountId(accountId: string): string {
  if (!ACCOUNT_ID.test(accountId))
    throw new AdminError(
      `invalid account id ${JSON.stringify(accountId)}: use 1-64 letters, digits, ".", "_" or "-"`,
    );
  return accountId;
}

/** A positive USD amount (or 0, when `zero` allows it) with at most 9 decimals, as nano-USD. */
function parseCredits(usd: string, zero: 'allowed' | 'refused' = 'refused'): bigint {
  if (!/^\d+(\.\d{1,9})?$/.test(usd))
    throw new AdminError(`invalid amount ${JSON.stringify(usd)}: a positive USD amount like 5 or 12.50`);
  const nano = usdToNano(usd);
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
  return { accountId, status: 'active', creditBalance: Number(nanoToUsd(credits)) };
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

export async function showAccount(ctx: AdminContext, accountId: string): Promise<AccountView> {
  const account = await getAccount(ctx, accountId);
  if (!account) throw new AdminError(`no such account: ${accountId}`);
  return {
    accountId,
    status: account.status,
    creditBalance: Number(nanoToUsd(account.balanceNano)),
    ...(account.heldNano !== 0n ? { held: Number(nanoToUsd(account.heldNano)) } : {}),
    ...(account.slices > 1 ? { slices: account.slices } : {}),
  };
}

/**
 * Splits a busy account's balance into `slices` slices (its requests then spread their writes over
 * that many items and partitions) and evens the credit out over them. Never fewer than it has.
 */
export async function splitAccount(
  ctx: AdminContext,
  accountId: string,
  slices: string | undefined,
): Promise<AccountView> {
  const count = Number(slices);
  if (!slices || !/^\d+$/.test(slices) || count < 1 || count > MAX_SLICES)
    throw new AdminError(`--slices must be a whole number from 1 to ${MAX_SLICES}`);
  await notFoundAsAdminError(accountId, () => ctx.store.splitAccount(accountId, count));
  return showAccount(ctx, accountId);
}

export async function setAccountStatus(
  ctx: AdminContext,
  accountId: string,
  status: AccountStatus,
): Promise<AccountView> {
  await notFoundAsAdminError(accountId, () =>
    ctx.store.setAccountStatus(accountId, status, new Date().toISOString()),
  );
  return showAccount(ctx, accountId);
}

/** Adds credits once per payment reference: the same reference twice adds once. */
export async function addCredits(
  ctx: AdminContext,
  accountId: string,
  usd: string,
  reference: string,
): Promise<{ applied: boolean; account: AccountView }> {
  const amount = parseCredits(usd);
  if (!/^[\x21-\x7e]{1,128}$/.test(reference))
    throw new AdminError('the reference must be 1-128 printable characters without spaces');
  const applied = await notFoundAsAdminError(accountId, () =>
    ctx.store.topUp(accountId, reference, amount, new Date().toISOString()),
  );
  return { applied, account: await showAccount(ctx, accountId) };
}

export async function createKey(
  ctx: AdminContext,
  accountId: string,
  name: string,
): Promise<{ key: string; keyId: string; name: string; accountId: string }> {
  if (name.trim() === '' || name.length > 128) throw new AdminError('the key name must be 1-128 characters');
  const generated = generateApiKey();
  await notFoundAsAdminError(accountId, () =>
    ctx.store.createKey({
      keyHash: generated.keyHash,
      keyId: generated.keyId,
      accountId,
      name,
      displayPrefix: generated.displayPrefix,
      status: 'active',
      createdAt: new Date().toISOString(),
    }),
  );
  return { key: generated.key, keyId: generated.keyId, name, accountId };
}

export async function revokeKey(ctx: AdminContext, keyId: string): Promise<KeyView> {
  const found = await ctx.store.findKeyById(keyId);
  if (!found) throw new AdminError(`no such key: ${keyId}`);
  return toKeyView(await ctx.store.revokeKey(found.keyHash, new Date().toISOString()));
}

export async function listKeys(ctx: AdminContext, accountId: string): Promise<KeyView[]> {
  if (!(await getAccount(ctx, accountId))) throw new AdminError(`no such account: ${accountId}`);
  return (await ctx.store.listKeys(accountId)).map(toKeyView);
}

function toKeyView(key: KeyRecord): KeyView {
  return {
    keyId: key.keyId,
    name: key.name,
    displayPrefix: key.displayPrefix,
    status: key.status,
    createdAt: key.createdAt,
    ...(key.revokedAt ? { revokedAt: key.revokedAt } : {}),
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
  /** Top-ups minus charges in nano-USD. */
  ledgerNano: bigint;
  differenceNano: bigint;
  /** heldNano on the account, and the sum of its hold items: they must agree too. */
  heldNano: bigint;
  holdsNano: bigint;
  entries: number;
}

/**
 * Checks that each account's creditBalance equals its top-ups minus its charges, and that what the
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
