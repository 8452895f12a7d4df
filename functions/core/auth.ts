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

/** How much of an unsupported scheme a 401 message repeats. */
export const SCHEME_SHOWN_CHARS = 32;
/** An Authorization header's first word, its scheme (when a credential follows it). */
export const AUTHORIZATION_SCHEME = /^(\S+)\s/;
/** A header that is the key's prefix and one token, without a scheme. */
export const KEY_WITHOUT_SCHEME = /^svc_live_\S*$/;
/** A Bearer credential: the scheme (any case), then one token. */
export const BEARER_CREDENTIAL = /^Bearer\s+(\S+)\s*$/i;

/**
 * The 401s of a missing or malformed key. The CloudFront viewer-request function answers the same ones
 * at the edge, generated from these and the patterns above (lib/infra/edge-function.ts).
 */
export const KEY_ERRORS = {
  missing: () =>
    new AuthenticationError(
      'Missing API key. Send it as "Authorization: Bearer svc_live_...".',
      'missing_api_key',
    ),
  scheme: (scheme: string) =>
    new AuthenticationError(
      `Unsupported authorization scheme "${scheme}": use "Authorization: Bearer <key>".`,
      'invalid_authorization_scheme',
    ),
  noScheme: () =>
    new AuthenticationError(
      'The API key is sent without its scheme: add "Bearer " before it ("Authorization: Bearer svc_live_...").',
      'invalid_authorization_scheme',
    ),
  malformed: () =>
    new AuthenticationError('Malformed API key. Keys look like "svc_live_" followed by 43 characters.'),
};

/**
 * Extracts the key from an `Authorization: Bearer <key>` header. Missing or malformed is a 401
 * decided here, without any I/O (the first step of every request: a missing or malformed key costs no read).
 */
export function parseBearerKey(header: string | undefined): string {
  if (!header) throw KEY_ERRORS.missing();
  // The key alone, as some clients' "API key header" settings send it: say what is missing (never the key).
  if (KEY_WITHOUT_SCHEME.test(header.trim())) throw KEY_ERRORS.noScheme();
  const scheme = AUTHORIZATION_SCHEME.exec(header.trim())?.[1];
  if (scheme && scheme.toLowerCase() !== 'bearer')
    throw KEY_ERRORS.scheme(scheme.slice(0, SCHEME_SHOWN_CHARS));
  const key = BEARER_CREDENTIAL.exec(header)?.[1];
  if (!key || !KEY_PATTERN.test(key)) throw KEY_ERRORS.malformed();
  return key;
}
