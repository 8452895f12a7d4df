/** Settings read from a function's environment at cold start: a bad value fails there, naming the variable. */

/** A positive integer setting, or `fallback` when it is unset or empty. */
export function positiveIntFromEnv(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value <= 0)
    throw new Error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`);
  return value;
}

/**
 * Per-key daily spend caps are an announced feature, not part of the product's contract (its spec:
 * "No per-key budget exists"; the caller tracks `usage.cost` itself), so they are off unless the
 * deploy turns them on: `cdk deploy -c keyDailyCaps=true` sets KEY_DAILY_CAPS=on on the functions;
 * locally `KEY_DAILY_CAPS=on npm start`, and the admin CLI reads the same variable. Off, a cap already
 * stored on a key is kept but ignored: admission never reads it, the dashboard and `/key` show none,
 * and nothing sets one. Any value but `on`, `off` or unset fails at cold start, naming the variable.
 */
export function keyDailyCapsOn(env: NodeJS.ProcessEnv = process.env): boolean {
  const raw = env.KEY_DAILY_CAPS;
  if (raw === undefined || raw === '' || raw === 'off') return false;
  if (raw === 'on') return true;
  throw new Error(`KEY_DAILY_CAPS must be on or off, got ${JSON.stringify(raw)}`);
}

/** What a request to set a cap is told while caps are off: the one setting that turns them on. */
export const KEY_DAILY_CAPS_OFF =
  'per-key daily caps are off: deploy with -c keyDailyCaps=true (locally KEY_DAILY_CAPS=on, for npm start and npm run admin)';
