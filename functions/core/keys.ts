/**
 * The one way an API key is made, for the operator's CLI (lib/admin/operations.ts) and the dashboard
 * (functions/dashboard/keys.ts) alike: a new random key (auth.ts generateApiKey) and the record the
 * store keeps of it (its hash, id, name and display prefix; never the key itself).
 */
import { generateApiKey } from './auth.js';
import type { KeyRecord } from './store.js';

export const MAX_KEY_NAME_LENGTH = 128;

/** A key's name: 1-128 characters, not only blanks. */
export const isValidKeyName = (name: string): boolean =>
  name.trim() !== '' && name.length <= MAX_KEY_NAME_LENGTH;

/**
 * A new active key of `accountId`: the full key (shown once, to whoever asked for it) and the record
 * to store with `store.createKey`.
 */
export function newApiKey(accountId: string, name: string, now: string): { key: string; record: KeyRecord } {
  const generated = generateApiKey();
  return {
    key: generated.key,
    record: {
      keyHash: generated.keyHash,
      keyId: generated.keyId,
      accountId,
      name,
      displayPrefix: generated.displayPrefix,
      status: 'active',
      createdAt: now,
    },
  };
}
