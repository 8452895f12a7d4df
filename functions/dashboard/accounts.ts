/**
 * What the dashboard does to accounts and keys, through the store port: the account of a signed-in
 * person (made at the first sign-in, $0 and no key, with them its owner; found at every later one),
 * and the account's keys (created the one way keys are made, functions/core/keys.ts, recording who
 * made them; renamed and revoked only if they are the account's), each change with its audit entry.
 */
import { createHash, randomBytes } from 'node:crypto';
import { keyNameProblem, newApiKey } from '../core/keys.js';
import {
  AccountExistsError,
  KeyNotFoundError,
  type KeyRecord,
  type Store,
  TooManyKeysError,
} from '../core/store.js';
import { type AuditEntry, auditEntry } from '../core/team.js';

/** Most active keys an account may have at once (revoked ones do not count). */
export const MAX_ACTIVE_KEYS = 20;

/**
 * The account id a subject's first sign-in makes: derived from the subject, so two first sign-ins at
 * once (two tabs) make the same account, never two.
 */
const accountIdFor = (subject: string): string =>
  `acct-${createHash('sha256').update(subject).digest('hex').slice(0, 24)}`;

/** A person signing in: the ID token's subject and e-mail, and their client (the audit entry's IP and User-Agent). */
interface Person {
  subject: string;
  email?: string | undefined;
  client?: Pick<AuditEntry, 'ip' | 'userAgent'>;
}

/** The first member of an account, its owner, with the entry that says how they came to be. */
async function makeOwner(store: Store, accountId: string, person: Person, now: string, how: string) {
  const actor = {
    kind: 'member' as const,
    subject: person.subject,
    ...(person.email ? { email: person.email } : {}),
  };
  const member = {
    accountId,
    subject: person.subject,
    email: person.email ?? '',
    role: 'owner' as const,
    joinedAt: now,
  };
  return store.addFirstOwner(
    member,
    auditEntry(accountId, actor, 'member.joined', now, {
      ...person.client,
      target: person.email || person.subject,
      details: { role: 'owner', how },
    }),
  );
}

/**
 * The account a person's sign-in opens. One they are a member of (the one their first sign-in made, if
 * they still are, else the oldest membership); a user of before teams, linked to their account by
 * the old `user#<subject>` link, becomes its owner now (lazily, at this sign-in); else a new account
 * is made, a $0 balance and no key, with them as its owner (a first sign-in). One whose link names an
 * account they are no longer a member of (removed from it) gets a new account of their own.
 */
export async function accountForSignIn(store: Store, person: Person, now: string): Promise<string> {
  const [memberships, linked] = await Promise.all([
    store.membershipsOf(person.subject),
    store.accountOfUser(person.subject),
  ]);
  const member = memberships.find((m) => m.accountId === linked) ?? memberships[0];
  if (member) return member.accountId;
  if (linked && (await makeOwner(store, linked, person, now, 'existing account'))) return linked;
  if (linked && (await store.getMember(linked, person.subject))) return linked;
  const fresh = linked ? `acct-${randomBytes(12).toString('hex')}` : accountIdFor(person.subject);
  try {
    await store.createAccount(fresh, 0n, now);
  } catch (error) {
    // Made by a sign-in that stopped before linking it, or by one running now: it is this subject's.
    if (!(error instanceof AccountExistsError)) throw error;
  }
  // Whichever first sign-in links first wins, and both open that account (a link is never replaced).
  const accountId = linked ? fresh : await store.linkUser(person.subject, fresh, now);
  if (
    !(await makeOwner(store, accountId, person, now, 'first sign-in')) &&
    !(await store.getMember(accountId, person.subject))
  )
    throw new Error(`the account ${accountId} made for a sign-in has another member`);
  return accountId;
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

/** A key's name as typed (trimmed), or KeyRequestError (400) saying what is wrong with it. */
function keyName(name: unknown): string {
  const trimmed = typeof name === 'string' ? name.trim() : '';
  const problem = keyNameProblem(trimmed);
  if (problem) throw new KeyRequestError(problem, 400);
  return trimmed;
}

/** Who makes a change to keys: the member (the key's `createdBy`) and the entry of the change. */
interface KeyChange {
  by: { subject: string; email?: string };
  audit: (key: KeyRecord) => AuditEntry;
}

/** A new key for the account, within the bound, recording who made it: the full key (shown once) and its record. */
export async function createAccountKey(
  store: Store,
  accountId: string,
  name: unknown,
  now: string,
  change: KeyChange,
): Promise<{ key: string; record: KeyRecord }> {
  const fresh = newApiKey(accountId, keyName(name), now);
  const created = { key: fresh.key, record: { ...fresh.record, createdBy: change.by } };
  try {
    // The bound is a condition of the key's own write (Store.createKey): keys created at once never pass
    // it; the audit entry is written in that same write.
    await store.createKey(created.record, {
      maxActive: MAX_ACTIVE_KEYS,
      audit: change.audit(created.record),
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

/** The account's own key by its id; undefined for one that is unknown or another account's (a 404). */
async function accountKey(store: Store, accountId: string, keyId: string): Promise<KeyRecord | undefined> {
  if (!/^key_[0-9A-Za-z]{1,64}$/.test(keyId)) return undefined;
  const key = await store.findKeyById(keyId);
  return key?.accountId === accountId ? key : undefined;
}

/** Revokes the account's own key, with its entry; undefined (a 404) for a key id that is unknown or another account's. */
export async function revokeAccountKey(
  store: Store,
  accountId: string,
  keyId: string,
  now: string,
  change: Pick<KeyChange, 'audit'>,
): Promise<KeyRecord | undefined> {
  const key = await accountKey(store, accountId, keyId);
  return key ? store.revokeKey(key.keyHash, now, { audit: change.audit(key) }) : undefined;
}

/**
 * Renames the account's own key, with its entry (given the key as it was); undefined (a 404) for a key id
 * that is unknown or another account's; KeyRequestError (400) for a name keyNameProblem refuses.
 */
export async function renameAccountKey(
  store: Store,
  accountId: string,
  keyId: string,
  name: unknown,
  change: Pick<KeyChange, 'audit'>,
): Promise<KeyRecord | undefined> {
  const renamed = keyName(name);
  const key = await accountKey(store, accountId, keyId);
  if (!key) return undefined;
  try {
    await store.renameKey(accountId, keyId, renamed, change.audit(key));
    return { ...key, name: renamed };
  } catch (error) {
    if (error instanceof KeyNotFoundError) return undefined;
    throw error;
  }
}

/** The account's keys as the page lists them, with a change just made that an index may not show yet. */
export async function keysWith(store: Store, accountId: string, changed?: KeyRecord): Promise<KeyRecord[]> {
  const keys = (await store.listKeys(accountId)).filter((key) => key.keyId !== changed?.keyId);
  return changed ? [changed, ...keys] : keys;
}
