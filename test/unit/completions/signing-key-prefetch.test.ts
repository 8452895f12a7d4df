import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterEach, describe, expect, it, vi } from 'vitest';

/**
 * The completions function asks for the secrets its requests wait for as it starts (during Lambda's
 * init): the usage-signing key, not at its first settlement, which would otherwise wait for Secrets
 * Manager before billing; the origin-verify values and the upstream credentials, not on its first
 * request's way to the upstream call, which would otherwise wait for each in turn.
 */
afterEach(() => {
  vi.unstubAllEnvs();
  vi.unstubAllGlobals();
  vi.resetModules();
});

describe('the completions function at its cold start', () => {
  it('asks Secrets Manager for the usage-signing key before any request', async () => {
    vi.resetModules();
    vi.stubEnv('USAGE_SIGNING_SECRET_ARN', 'arn:aws:secretsmanager:local:000000000000:secret:usage-signing');
    vi.stubEnv('UPSTREAM_BASE_URL', 'http://127.0.0.1:9/v1');
    // What Lambda's Node.js runtime gives a response-streaming handler at load (unused here).
    vi.stubGlobal('awslambda', { streamifyResponse: (handler: unknown) => handler, HttpResponseStream: {} });
    const secrets = await import('../../../functions/adapters/secrets.js');
    const send = vi.fn(async () => ({ SecretString: 'a-signing-key' }));
    secrets.setSecretsClient({ send } as unknown as SecretsManagerClient);
    await import('../../../functions/completions/handler.js');
    await vi.waitFor(() => expect(send).toHaveBeenCalledTimes(1));
    const [command] = send.mock.calls[0] as unknown as [{ input: { SecretId: string } }];
    expect(command.input.SecretId).toBe('arn:aws:secretsmanager:local:000000000000:secret:usage-signing');
    // The settlement's own read is the cached answer: no second call.
    expect(await secrets.usageSigningKey()).toBe('a-signing-key');
    expect(send).toHaveBeenCalledTimes(1);
  });

  it('asks for the origin-verify values and the upstream credentials before any request, once each', async () => {
    vi.resetModules();
    vi.stubEnv('ORIGIN_VERIFY_SECRET_ARN', 'arn:aws:secretsmanager:local:000000000000:secret:origin');
    vi.stubEnv('UPSTREAM_SECRET_ARN', 'arn:aws:secretsmanager:local:000000000000:secret:upstream');
    vi.stubEnv('UPSTREAM_BASE_URL', 'http://127.0.0.1:9/v1');
    vi.stubEnv('UPSTREAM_API_KEY', 'unused-when-the-secret-is-set');
    vi.stubGlobal('awslambda', { streamifyResponse: (handler: unknown) => handler, HttpResponseStream: {} });
    const secrets = await import('../../../functions/adapters/secrets.js');
    const send = vi.fn(async (command: { input: { SecretId: string; VersionStage: string } }) =>
      command.input.SecretId.endsWith('upstream')
        ? { SecretString: JSON.stringify({ UPSTREAM_API_KEY: 'sk-upstream' }) }
        : { SecretString: `origin-${command.input.VersionStage}` },
    );
    secrets.setSecretsClient({ send } as unknown as SecretsManagerClient);
    await import('../../../functions/completions/handler.js');
    const asked = () =>
      (send.mock.calls as unknown as [{ input: { SecretId: string; VersionStage: string } }][]).map(
        ([command]) => `${command.input.SecretId.split(':').pop()}#${command.input.VersionStage}`,
      );
    // The origin secret's current and previous versions, and the upstream credentials' one secret
    // (named by all three tiers, read once).
    await vi.waitFor(() =>
      expect(asked().sort()).toEqual(['origin#AWSCURRENT', 'origin#AWSPREVIOUS', 'upstream#AWSCURRENT']),
    );
    // A request's own reads are the cached answers: no further call.
    expect(await secrets.upstreamCredential('UPSTREAM_API_KEY')).toBe('sk-upstream');
    expect(await secrets.originVerifyValues()).toEqual(['origin-AWSCURRENT', 'origin-AWSPREVIOUS']);
    expect(send).toHaveBeenCalledTimes(3);
  });
});
