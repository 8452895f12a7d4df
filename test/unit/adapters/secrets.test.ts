import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  clearSecretCache,
  getSecretString,
  MissingCredentialError,
  originVerifyValues,
  setSecretsClient,
  upstreamCredential,
} from '../../../functions/adapters/secrets.js';

/** The Secrets Manager path (no emulator exists here): fetched once per cold start, refreshed on an interval. */
const secrets = mockClient(SecretsManagerClient);
const ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:upstream-AbCdEf';
const env = { UPSTREAM_SECRET_ARN: ARN } as NodeJS.ProcessEnv;

beforeEach(() => {
  secrets.reset();
  clearSecretCache();
  setSecretsClient(new SecretsManagerClient({ region: 'eu-west-1' }));
});
afterEach(() => {
  clearSecretCache();
});

describe('upstream credentials from Secrets Manager', () => {
  it('reads the named entry of the JSON secret, fetching it once for many requests', async () => {
    secrets
      .on(GetSecretValueCommand, { SecretId: ARN })
      .resolves({ SecretString: JSON.stringify({ openrouter: 'sk-or-1', openai: 'sk-2' }) });
    expect(await upstreamCredential('openrouter', env)).toBe('sk-or-1');
    expect(await upstreamCredential('openai', env)).toBe('sk-2');
    await Promise.all(Array.from({ length: 20 }, () => upstreamCredential('openai', env)));
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(1);
  });

  it('refreshes after its interval, and keeps the last good value when a refresh fails', async () => {
    secrets
      .on(GetSecretValueCommand)
      .resolvesOnce({ SecretString: 'first' })
      .resolvesOnce({ SecretString: 'second' })
      .rejects(new Error('AccessDenied'));
    const t0 = 1_000_000;
    expect(await getSecretString(ARN, 60_000, t0)).toBe('first');
    expect(await getSecretString(ARN, 60_000, t0 + 59_000)).toBe('first');
    expect(await getSecretString(ARN, 60_000, t0 + 61_000)).toBe('second');
    expect(await getSecretString(ARN, 60_000, t0 + 200_000)).toBe('second');
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(3);
  });

  it('refreshes ahead in the last fifth of its interval, so that no read waits for it', async () => {
    secrets
      .on(GetSecretValueCommand)
      .resolvesOnce({ SecretString: 'first' })
      .resolves({ SecretString: 'second' });
    const t0 = 1_000_000;
    const calls = () => secrets.commandCalls(GetSecretValueCommand).length;
    expect(await getSecretString(ARN, 60_000, t0)).toBe('first');
    expect(await getSecretString(ARN, 60_000, t0 + 47_000)).toBe('first');
    expect(calls()).toBe(1);
    // In the last fifth: the value in hand at once, its refresh under way.
    expect(await getSecretString(ARN, 60_000, t0 + 49_000)).toBe('first');
    expect(await getSecretString(ARN, 60_000, t0 + 50_000)).toBe('first');
    await vi.waitFor(() => expect(calls()).toBe(2));
    // Past the first interval: the refreshed value, with no call of its own.
    expect(await getSecretString(ARN, 60_000, t0 + 61_000)).toBe('second');
    expect(calls()).toBe(2);
  });

  it('names a missing entry without showing any secret value, as a 500 for the client', async () => {
    secrets
      .on(GetSecretValueCommand)
      .resolves({ SecretString: JSON.stringify({ other: 'sk-secret-value' }) });
    const error = await upstreamCredential('openrouter', env).catch((e: Error) => e);
    expect(error).toBeInstanceOf(MissingCredentialError);
    expect(error).toMatchObject({ statusCode: 500, code: 'upstream_credential_missing' });
    expect((error as MissingCredentialError).message).toContain('"openrouter"');
    expect(JSON.stringify((error as MissingCredentialError).toBody())).not.toContain('sk-secret-value');
  });

  it.each([
    ['the secret as the stack creates it', '{}'],
    ['an empty key', JSON.stringify({ openrouter: '' })],
    ['a key that is not a string', JSON.stringify({ openrouter: 42 })],
    ['an inherited name', JSON.stringify({})],
    ['a value that is not JSON', 'sk-or-not-json-secret'],
    ['JSON null', 'null'],
    ['a JSON array', '["sk-or-in-array"]'],
  ])('answers a 500 naming the credential for %s', async (_, SecretString) => {
    secrets.on(GetSecretValueCommand).resolves({ SecretString });
    const name = _ === 'an inherited name' ? 'constructor' : 'openrouter';
    const error = await upstreamCredential(name, env).catch((e: Error) => e);
    expect(error).toBeInstanceOf(MissingCredentialError);
    expect((error as Error).message).toContain(`"${name}"`);
    expect((error as Error).message).not.toMatch(/sk-or/);
  });

  it('fails at first use when the secret cannot be read at all', async () => {
    secrets.on(GetSecretValueCommand).rejects(new Error('ResourceNotFoundException'));
    await expect(upstreamCredential('openrouter', env)).rejects.toThrow(/ResourceNotFound/);
  });

  it('uses the environment locally, and no credential for a keyless upstream', async () => {
    expect(await upstreamCredential('MY_KEY', { MY_KEY: 'local-key' } as NodeJS.ProcessEnv)).toBe(
      'local-key',
    );
    await expect(upstreamCredential('MY_KEY', {} as NodeJS.ProcessEnv)).rejects.toThrow(
      /"MY_KEY" is not configured: no environment variable/,
    );
    expect(await upstreamCredential(undefined, env)).toBeUndefined();
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(0);
  });
});

describe('the origin-verify value', () => {
  it('comes from its secret in Lambda and from the environment locally', async () => {
    secrets.on(GetSecretValueCommand).rejects(new Error('ResourceNotFoundException'));
    secrets
      .on(GetSecretValueCommand, { SecretId: 'arn:origin', VersionStage: 'AWSCURRENT' })
      .resolves({ SecretString: 'cloudfront-shared-secret' });
    expect(await originVerifyValues({ ORIGIN_VERIFY_SECRET_ARN: 'arn:origin' } as NodeJS.ProcessEnv)).toEqual(
      ['cloudfront-shared-secret'],
    );
    expect(await originVerifyValues({ ORIGIN_VERIFY_VALUE: 'abc' } as NodeJS.ProcessEnv)).toEqual(['abc']);
    expect(await originVerifyValues({} as NodeJS.ProcessEnv)).toEqual([]);
  });

  it('asks for a previous version that is not there once per interval, not on every request', async () => {
    // A secret never rotated has no AWSPREVIOUS version: Secrets Manager answers ResourceNotFoundException.
    secrets
      .on(GetSecretValueCommand, { SecretId: 'arn:fresh', VersionStage: 'AWSCURRENT' })
      .resolves({ SecretString: 'only-value' })
      .on(GetSecretValueCommand, { SecretId: 'arn:fresh', VersionStage: 'AWSPREVIOUS' })
      .rejects(
        Object.assign(new Error("Secrets Manager can't find the specified secret value"), {
          name: 'ResourceNotFoundException',
        }),
      );
    const env = { ORIGIN_VERIFY_SECRET_ARN: 'arn:fresh' } as NodeJS.ProcessEnv;
    for (let i = 0; i < 5; i++) expect(await originVerifyValues(env)).toEqual(['only-value']);
    const previousAsks = secrets
      .commandCalls(GetSecretValueCommand)
      .filter((call) => call.args[0].input.VersionStage === 'AWSPREVIOUS');
    expect(previousAsks).toHaveLength(1);
  });

  it("accepts the secret's current and previous versions during a rotation", async () => {
    secrets
      .on(GetSecretValueCommand, { SecretId: 'arn:rotated', VersionStage: 'AWSCURRENT' })
      .resolves({ SecretString: 'new-value' })
      .on(GetSecretValueCommand, { SecretId: 'arn:rotated', VersionStage: 'AWSPREVIOUS' })
      .resolves({ SecretString: 'old-value' });
    expect(
      await originVerifyValues({ ORIGIN_VERIFY_SECRET_ARN: 'arn:rotated' } as NodeJS.ProcessEnv),
    ).toEqual(['new-value', 'old-value']);
  });
});
