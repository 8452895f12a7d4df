/**
 * The one way an API key is made, for the operator's CLI (lib/admin/operations.ts) and the dashboard
 * (functions/dashboard/keys.ts) alike: a new random key (auth.ts generateApiKey) and the record the
 * store keeps of it (its hash, id, name and display prefix; never the key itself).
 */
import { generateApiKey } from './auth.js';
import type { KeyRecord } from './store.js';

const MAX_KEY_NAME_LENGTH = 128;

/**
 * Characters a key name may not hold: C0 controls, DEL and C1 controls (U+0080-U+009F: U+0085 is a
 * line break, U+009B a terminal's escape), the line and paragraph separators, and the bidirectional
 * controls (a name that reorders the text around it where it is shown). A name is shown on the
 * dashboard, in the Activity CSV's key_name and in GET /api/v1/key's label.
 */
const FORBIDDEN_IN_NAME =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

/** Why a key's name is refused (the message to show), or undefined for a good one. */
export function keyNameProblem(name: string): string | undefined {
  if (name.trim() === '' || name.length > MAX_KEY_NAME_LENGTH)
    return `A key name is 1 to ${MAX_KEY_NAME_LENGTH} characters, not only spaces.`;
  if (FORBIDDEN_IN_NAME.test(name) || !name.isWellFormed())
    return 'A key name may not contain control characters (line breaks, tabs, escapes, text-direction marks).';
  return undefined;
}

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
