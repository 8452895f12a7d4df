/**
 * What the dashboard does to accounts and keys, through the store port: the account of a signed-in
 * user (made at the first sign-in, $0 and no key; found at every later one), and a customer's own
 * keys (created the one way keys are made, functions/core/keys.ts; revoked only if they are theirs).
 */
import { createHash } from 'node:crypto';
import { keyNameProblem, newApiKey } from '../core/keys.js';
import { AccountExistsError, type KeyRecord, type Store, TooManyKeysError } from '../core/store.js';
import { type Actor, type AuditAction, auditEntry } from '../core/team.js';

/** Most active keys an account may have at once (revoked ones do not count). */
export const MAX_ACTIVE_KEYS = 20;

/**
 * The account id a subject's first sign-in makes: derived from the subject, so two first sign-ins at
 * once (two tabs) make the same account, never two.
 */
const accountIdFor = (subject: string): string =>
  `acct-${createHash('sha256').update(subject).digest('hex').slice(0, 24)}`;

/**
 * The account of a signed-in subject. The first time: an active account with a $0 balance (no free
 * credits, no ledger entry) and no key, then the subject's link to it (conditional: whichever sign-in
 * links first wins, and both get that account). Later: the link alone is read; nothing is written.
 */
export async function accountForSignIn(store: Store, subject: string, now: string): Promise<string> {
  const linked = await store.accountOfUser(subject);
  if (linked) return linked;
  const accountId = accountIdFor(subject);
  try {
    await store.createAccount(accountId, 0n, now);
  } catch (error) {
    // Made by a sign-in that stopped before linking it, or by one running now: it is this subject's.
    if (!(error instanceof AccountExistsError)) throw error;
  }
  return store.linkUser(subject, accountId, now);
}

/** A refusal to show the customer (400 or 409), nothing written. */
export class KeyRequestError extends Error {
  constructor(
    message: string,
    readonly status: 400 | 409,
  ) {
    super(message);
    this.name = 'KeyRequestError';
  }
}

/** Who made a change on the dashboard, for its audit entry: the member, their IP and User-Agent. */
export interface ChangedBy {
  actor: Actor;
  ip?: string;
  userAgent?: string;
}

/** The audit entry of a key change by `by` (the key's id and prefix, never the key). */
const keyEntry = (by: ChangedBy, accountId: string, action: AuditAction, key: KeyRecord, now: string) => ({
  audit: auditEntry(accountId, by.actor, action, now, {
    target: key.keyId,
    details: { name: key.name, prefix: key.displayPrefix },
    ...(by.ip ? { ip: by.ip } : {}),
    ...(by.userAgent ? { userAgent: by.userAgent.slice(0, 256) } : {}),
  }),
});

/**
 * A new key for the account, within the bound: the full key (shown once) and its record. With `by`,
 * the key records its maker and is written with its audit entry.
 */
export async function createAccountKey(
  store: Store,
  accountId: string,
  name: unknown,
  now: string,
  by?: ChangedBy,
): Promise<{ key: string; record: KeyRecord }> {
  const trimmed = typeof name === 'string' ? name.trim() : '';
  const problem = keyNameProblem(trimmed);
  if (problem) throw new KeyRequestError(problem, 400);
  const created = newApiKey(accountId, trimmed, now);
  const { subject, email } = by?.actor ?? {};
  if (subject) created.record.createdBy = { subject, ...(email ? { email } : {}) };
  try {
    // The bound is a condition of the key's own write (Store.createKey): keys created at once never pass it.
    await store.createKey(created.record, {
      maxActive: MAX_ACTIVE_KEYS,
      ...(by ? keyEntry(by, accountId, 'key.created', created.record, now) : {}),
    });
  } catch (error) {
    if (!(error instanceof TooManyKeysError)) throw error;
    throw new KeyRequestError(
      `You already have ${MAX_ACTIVE_KEYS} active keys, the most an account may have. Revoke one you no longer use, then create the new one.`,
      409,
    );
  }
  return created;
}

/**
 * Revokes the account's own key (with `by`, with its audit entry); undefined (a 404) for a key id that
 * is unknown or another account's.
 */
export async function revokeAccountKey(
  store: Store,
  accountId: string,
  keyId: string,
  now: string,
  by?: ChangedBy,
): Promise<KeyRecord | undefined> {
  if (!/^key_[0-9A-Za-z]{1,64}$/.test(keyId)) return undefined;
  const key = await store.findKeyById(keyId);
  if (!key || key.accountId !== accountId) return undefined;
  return store.revokeKey(key.keyHash, now, by ? keyEntry(by, accountId, 'key.revoked', key, now) : {});
}

/** The account's keys as the page lists them, with a change just made that an index may not show yet. */
export async function keysWith(store: Store, accountId: string, changed?: KeyRecord): Promise<KeyRecord[]> {
  const keys = (await store.listKeys(accountId)).filter((key) => key.keyId !== changed?.keyId);
  return changed ? [changed, ...keys] : keys;
}
