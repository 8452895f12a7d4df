import { randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * Random bytes drawn from the system's CSPRNG 4 KiB at a time, each used once (as node:crypto's own
 * `randomUUID` pools its entropy): a `randomBytes` call per generation id was about 27 us of a JSON
 * request's CPU in a V8 profile of the completions function, most of it the call itself. The two side
 * by side in one process on Node 22, ids made 5 ms apart (8 rounds of 200): 39.7 us per id with a
 * `randomBytes` call each, 12.1 with the pool (medians). Filled on first use, not at module load, so
 * a snapshot of an initialised instance holds none.
 */
const POOL = Buffer.alloc(4096);
let poolOffset = POOL.length;

function randomByte(): number {
  if (poolOffset === POOL.length) {
    randomFillSync(POOL);
    poolOffset = 0;
  }
  return POOL[poolOffset++] as number;
}

/** Uniformly random base62 string (rejection sampling, no modulo bias). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const byte = randomByte();
    if (byte < 248) out += ALPHABET[byte % 62];
  }
  return out;
}

/**
 * `gen-<unix_seconds>-<random_suffix>` (the format the product specifies). At most 35 characters, so
 * it also fits a ClientRequestToken. Given a balance slice (0-61), the suffix's first character names
 * it (the other 19 are random): whatever holds only the id finds the slice it was billed on.
 */
export function newGenerationId(nowMs = Date.now(), slice?: number): string {
  const suffix = slice === undefined ? randomBase62(20) : `${ALPHABET[slice]}${randomBase62(19)}`;
  return `gen-${Math.floor(nowMs / 1000)}-${suffix}`;
}

/** The slice a generation id names (its suffix's first character), or undefined if it is not an id. */
export function sliceOfGenerationId(id: string): number | undefined {
  if (!GENERATION_ID_PATTERN.test(id)) return undefined;
  return ALPHABET.indexOf(id.charAt(15));
}

export const GENERATION_ID_PATTERN = /^gen-\d{10}-[0-9A-Za-z]{20}$/;
