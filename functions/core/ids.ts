import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Uniformly random base62 string (rejection sampling, no modulo bias). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += ALPHABET[byte % 62];
    }
  }
  return out;
}

/** `gen-<unix_seconds>-<random_suffix>` (the format the product specifies). At most 35 characters, so it also fits a ClientRequestToken. */
export function newGenerationId(nowMs = Date.now()): string {
  return `gen-${Math.floor(nowMs / 1000)}-${randomBase62(20)}`;
}

export const GENERATION_ID_PATTERN = /^gen-\d{10}-[0-9A-Za-z]{20}$/;
