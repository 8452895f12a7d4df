import { afterEach, describe, expect, it } from 'vitest';
import { defaultProvider } from '../../../functions/adapters/lambda-credentials.js';

/** The bundles' credential provider: Lambda's environment variables, and a clear failure without them. */
const NAMES = ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN'] as const;
const saved = Object.fromEntries(NAMES.map((name) => [name, process.env[name]]));
afterEach(() => {
  for (const name of NAMES) {
    if (saved[name] === undefined) delete process.env[name];
    else process.env[name] = saved[name];
  }
});

describe('the bundles’ credential provider', () => {
  it('reads the credentials Lambda puts in the environment, session token included', async () => {
    process.env.AWS_ACCESS_KEY_ID = 'ASIATEST';
    process.env.AWS_SECRET_ACCESS_KEY = 'secret';
    process.env.AWS_SESSION_TOKEN = 'token';
    expect(await defaultProvider()()).toMatchObject({
      accessKeyId: 'ASIATEST',
      secretAccessKey: 'secret',
      sessionToken: 'token',
    });
  });

  it('fails with the SDK’s credentials error when the environment has none', async () => {
    for (const name of NAMES) delete process.env[name];
    await expect(defaultProvider()()).rejects.toMatchObject({ name: 'CredentialsProviderError' });
  });
});
