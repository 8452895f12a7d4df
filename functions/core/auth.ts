import { hash } from 'node:crypto';
import { AuthenticationError } from './errors.js';
import { randomBase62 } from './ids.js';

/** `svc_live_` followed by 43 characters (the product's key format): 43 base62 characters carry 256 bits. */
const KEY_PREFIX = 'svc_live_';
export const KEY_PATTERN = /^svc_live_[0-9A-Za-z]{43}$/;

export interface NewApiKey {
  /** The full key: shown once, never stored. */
  key: string;
  /** SHA-256 hex of the full key: the only stored form. */
  keyHash: string;
  /** Public identifier used by the operator to list and revoke. */
  keyId: string;
  /** What a listing shows: the prefix and the first four random characters. */
  displayPrefix: string;
}

export function hashKey(key: string): string {
  return hash('sha256', key);
}

export function generateApiKey(): NewApiKey {
  const key = `${KEY_PREFIX}${randomBase62(43)}`;
  const keyHash = hashKey(key);
  return {
    key,
    keyHash,
    keyId: `key_${keyHash.slice(0, 16)}`,
    displayPrefix: `${key.slice(0, KEY_PREFIX.length + 4)}...`,
  };
}

/**
 * Extracts the key from an `Authorization: Bearer <key>` header. Missing or malformed is a 401
 * decided here, without any I/O (the first step of every request: a missing or malformed key costs no read).
 */
export function parseBearerKey(header: string | undefined): string {
  if (!header) {
    throw new AuthenticationError(
      'Missing API key. Send it as "Authorization: Bearer svc_live_...".',
      'missing_api_key',
    );
  }
  // The key alone, as some clients' "API key header" settings send it: say what is missing (never the key).
  if (/^svc_live_\S*$/.test(header.trim()))
    throw new AuthenticationError(
      'The API key is sent without its scheme: add "Bearer " before it ("Authorization: Bearer svc_live_...").',
      'invalid_authorization_scheme',
    );
  const scheme = /^(\S+)\s/.exec(header.trim())?.[1];
  if (scheme && scheme.toLowerCase() !== 'bearer') {
    throw new AuthenticationError(
      `Unsupported authorization scheme "${scheme.slice(0, 32)}": use "Authorization: Bearer <key>".`,
      'invalid_authorization_scheme',
    );
  }
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  const key = match?.[1];
  if (!key || !KEY_PATTERN.test(key)) {
    throw new AuthenticationError('Malformed API key. Keys look like "svc_live_" followed by 43 characters.');
  }
  return key;
}
