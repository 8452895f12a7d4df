import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { HttpError } from '../core/errors.js';
import { credentialsFromEnv, regionalHost } from './dynamodb/connection.js';
import { getSecretValue } from './secrets-manager.js';

/**
 * Secrets from Secrets Manager, fetched once per cold start and refreshed after `ttlMs`, never per
 * request. A refresh failure keeps serving the last good value. Locally, values come from the environment.
 * A value read in the last fifth of its interval is answered at once and its refresh started then, so
 * that a steady stream of requests never waits for one (the origin check's before the caller's read,
 * an upstream credential's before the upstream call); no value is served older than `ttlMs`.
 *
 * In a function (AWS_LAMBDA_FUNCTION_NAME, AWS_REGION and the role's credentials in the environment,
 * as Lambda sets them) GetSecretValue is signed and sent directly (secrets-manager.ts), so the bundles
 * carry no SDK client. Elsewhere (the operator's CLI, whose credentials may come from a profile or
 * SSO; tests running a function in their own process, with Secrets Manager mocked) and with a client
 * given by setSecretsClient (tests), it goes through the SDK's client, loaded at run time by a name
 * the bundler does not follow: the bundles never reach that path in Lambda.
 */
let client: SecretsManagerClient | undefined;

/** For tests: use this client instead of the module's own. */
export function setSecretsClient(next: SecretsManagerClient): void {
  client = next;
}

/** The SDK's Secrets Manager package, loaded only off the functions' path (see above). */
function secretsSdk(): Promise<typeof import('@aws-sdk/client-secrets-manager')> {
  const name = ['@aws-sdk', 'client-secrets-manager'].join('/');
  return import(name);
}

/** The secret's string value, directly in a function, else through the SDK's client. */
async function readSecret(secretId: string, versionStage: string): Promise<string | undefined> {
  const env = process.env;
  const region = env.AWS_REGION;
  if (!client && env.AWS_LAMBDA_FUNCTION_NAME && region && env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY)
    return getSecretValue(
      {
        url: `https://${regionalHost('secretsmanager', region, env)}`,
        region,
        credentials: credentialsFromEnv(env),
      },
      secretId,
      versionStage,
    );
  const sdk = await secretsSdk();
  // Bounded waits: a stalled Secrets Manager fails the cold request in seconds, never hangs it.
  client ??= new sdk.SecretsManagerClient({
    maxAttempts: 3,
    requestHandler: { connectionTimeout: 1_000, requestTimeout: 2_000, throwOnRequestTimeout: true },
  });
  const out = await client.send(
    new sdk.GetSecretValueCommand({ SecretId: secretId, VersionStage: versionStage }),
  );
  return out.SecretString;
}

interface Entry {
  value: string;
  fetchedAt: number;
}
const cache = new Map<string, Entry>();
/** The share of its interval after which a value read starts its refresh (and is still answered). */
const REFRESH_AHEAD_AT = 0.8;
const inflight = new Map<string, Promise<string>>();

export async function getSecretString(
  secretId: string,
  ttlMs = 5 * 60_000,
  now = Date.now(),
  versionStage = 'AWSCURRENT',
): Promise<string> {
  const key = `${secretId}#${versionStage}`;
  const hit = cache.get(key);
  const age = hit ? now - hit.fetchedAt : Number.POSITIVE_INFINITY;
  if (hit && age < ttlMs * REFRESH_AHEAD_AT) return hit.value;
  let pending = inflight.get(key);
  if (!pending) {
    pending = fetchSecret(secretId, versionStage, key, now, hit).finally(() => inflight.delete(key));
    inflight.set(key, pending);
  }
  // Refreshing ahead: the value in hand is still within its interval (a failed refresh keeps it).
  if (hit && age < ttlMs) return hit.value;
  return pending;
}

async function fetchSecret(
  secretId: string,
  versionStage: string,
  key: string,
  now: number,
  previous: Entry | undefined,
): Promise<string> {
  try {
    const value = await readSecret(secretId, versionStage);
    if (value === undefined) throw new Error(`secret ${secretId} has no string value`);
    cache.set(key, { value, fetchedAt: now });
    return value;
  } catch (error) {
    if (previous) return previous.value;
    throw error;
  }
}

export function clearSecretCache(): void {
  cache.clear();
  noPrevious.clear();
}

/**
 * The values CloudFront may send in `x-origin-verify`: the secret's current version and, during a
 * rotation, its previous one (docs/deploy.md, "Rotating the origin secret"); empty where no check applies
 * (local use without a value). Read every 5 minutes, so a new current version is accepted within 5
 * minutes of being put, before the distribution is redeployed to send it.
 */
export async function originVerifyValues(env: NodeJS.ProcessEnv = process.env): Promise<string[]> {
  const arn = env.ORIGIN_VERIFY_SECRET_ARN;
  if (arn) return currentAndPrevious(arn);
  return [env.ORIGIN_VERIFY_VALUE, env.ORIGIN_VERIFY_PREVIOUS_VALUE].filter((v): v is string => Boolean(v));
}

/** A secret's current version and, during a rotation, its previous one, each read every `ttlMs` (5 minutes). */
async function currentAndPrevious(arn: string, ttlMs = 5 * 60_000): Promise<string[]> {
  const [current, previous] = await Promise.all([getSecretString(arn, ttlMs), previousVersion(arn, ttlMs)]);
  return previous && previous !== current ? [current, previous] : [current];
}

/** When each secret was last found to have no previous version (or it could not be read). */
const noPrevious = new Map<string, number>();

/**
 * A secret's previous version, or undefined: a secret never rotated has none (Secrets Manager answers
 * ResourceNotFoundException), and that answer is kept as long as a value would be, so it is asked
 * again every `ttlMs`, not on every request.
 */
async function previousVersion(arn: string, ttlMs: number): Promise<string | undefined> {
  const missingSince = noPrevious.get(arn);
  if (missingSince !== undefined && Date.now() - missingSince < ttlMs) return undefined;
  try {
    const previous = await getSecretString(arn, ttlMs, Date.now(), 'AWSPREVIOUS');
    noPrevious.delete(arn);
    return previous;
  } catch {
    noPrevious.set(arn, Date.now());
    return undefined;
  }
}

/**
 * The key that signs each usage line (functions/billing/settle.ts, usage-record.ts): only the
 * completions function, which writes the lines, and the readers that bill from them may read it. In
 * Lambda: the usage-signing secret's current version (USAGE_SIGNING_SECRET_ARN), read at the first
 * settlement of an instance and every 5 minutes after, the last good value kept when a refresh fails.
 * Locally: USAGE_SIGNING_KEY, which the local stack sets. Undefined where neither is set.
 */
export async function usageSigningKey(env: NodeJS.ProcessEnv = process.env): Promise<string | undefined> {
  const arn = env.USAGE_SIGNING_SECRET_ARN;
  if (arn) return getSecretString(arn, 5 * 60_000);
  return env.USAGE_SIGNING_KEY || undefined;
}

/**
 * Starts reading, during an instance's init, every secret its requests wait for, so that its first
 * request finds them read or on the wire instead of asking for each in turn: the origin-verify values
 * (checked before the caller's read), the upstream credentials the tiers name (read after admission,
 * before the upstream call) and the usage-signing key (at the first settlement). The cache shares each
 * call with the request that asks for it; a failure here is left to that request, which asks again.
 */
export function prefetchRequestSecrets(credentialNames: Iterable<string | undefined>): void {
  const ignore = () => undefined;
  originVerifyValues().catch(ignore);
  usageSigningKey().catch(ignore);
  for (const name of new Set(credentialNames)) if (name) upstreamCredential(name).catch(ignore);
}

/**
 * The keys a usage line's signature is checked against: the secret's current version and, during a
 * rotation, its previous one, so that a line signed just before a rotation is still billed (the
 * logged-usage function, `admin bill-logged` with the operator's credentials). Read every 5 minutes,
 * or now with `fresh` (a line signed with a key newer than the copy held). Locally USAGE_SIGNING_KEY
 * and USAGE_SIGNING_PREVIOUS_KEY. Empty where none is set.
 */
export async function usageVerifyingKeys(
  env: NodeJS.ProcessEnv = process.env,
  { fresh = false }: { fresh?: boolean } = {},
): Promise<string[]> {
  const arn = env.USAGE_SIGNING_SECRET_ARN;
  if (arn) return currentAndPrevious(arn, fresh ? 0 : 5 * 60_000);
  return [env.USAGE_SIGNING_KEY, env.USAGE_SIGNING_PREVIOUS_KEY].filter((v): v is string => Boolean(v));
}

/**
 * A credential the tier configuration names is not set: the operator's to fix, so a 500 that says
 * which entry to add, by name (never a value). Thrown before any upstream call: nothing is charged.
 */
export class MissingCredentialError extends HttpError {
  constructor(name: string, where: string) {
    super(500, `The upstream credential "${name}" is not configured: ${where}. Nothing was charged.`, {
      type: 'server_error',
      code: 'upstream_credential_missing',
    });
    this.name = 'MissingCredentialError';
  }
}

/**
 * The API key for a named upstream credential. In Lambda: the entry of that name in the JSON
 * upstream-credentials secret (created as `{}`: until the operator puts the keys, every request
 * that needs one answers a MissingCredentialError). Locally: the environment variable of that name.
 */
export async function upstreamCredential(
  name: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string | undefined> {
  if (!name) return undefined;
  if (env.UPSTREAM_SECRET_ARN) {
    const secret = await getSecretString(env.UPSTREAM_SECRET_ARN);
    let parsed: unknown;
    try {
      parsed = JSON.parse(secret);
    } catch {
      parsed = undefined;
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new MissingCredentialError(
        name,
        'the upstream-credentials secret is not a JSON object of credential names to keys',
      );
    const value: unknown = Object.hasOwn(parsed, name)
      ? (parsed as Record<string, unknown>)[name]
      : undefined;
    if (typeof value !== 'string' || value === '')
      throw new MissingCredentialError(name, 'the upstream-credentials secret has no entry of that name');
    return value;
  }
  const value = env[name];
  if (!value) throw new MissingCredentialError(name, 'no environment variable of that name is set');
  return value;
}
