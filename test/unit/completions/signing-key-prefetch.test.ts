import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterEach, describe, expect, it, vi } from 'vitest';

/**
 * The completions function asks for the usage-signing key as it starts (during Lambda's init), not at
 * its first settlement, which would otherwise wait for Secrets Manager before billing.
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
});
