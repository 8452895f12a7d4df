import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inProcessLauncher } from '../../lib/local/emulator.js';
import { balanceNano, newAccount, startTarget, type Target } from '../support/target.js';

/**
 * A new stack's upstream-credentials secret holds `{}` until the operator puts the keys: a completion
 * then answers a 500 that names the missing credential (never a value) and charges nothing. The
 * secret comes from a (mocked) Secrets Manager, as in Lambda; GetSecretValue answers the stored
 * SecretString as it is (https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html).
 */
const secrets = mockClient(SecretsManagerClient);
let target: Target;

beforeAll(async () => {
  secrets.on(GetSecretValueCommand).resolves({ SecretString: '{}' });
  target = await startTarget({
    launcher: inProcessLauncher,
    env: {
      UPSTREAM_SECRET_ARN: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:upstream',
      // The tier configuration names the credential UPSTREAM_API_KEY; its value is not read locally.
      UPSTREAM_API_KEY: 'sk-local-value-never-shown',
    },
  });
});
afterAll(async () => {
  await target?.stop();
  secrets.restore();
});

describe('an upstream credential missing from its secret', () => {
  it.each([false, true])('answers a 500 naming it, and charges nothing (stream %s)', async (stream) => {
    const { key, accountId } = await newAccount(target, '5');
    const before = await balanceNano(target, accountId);
    const response = await fetch(`${target.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }], stream }),
    });
    const text = await response.text();
    expect(response.status).toBe(500);
    expect(JSON.parse(text)).toEqual({
      error: {
        message:
          'The upstream credential "UPSTREAM_API_KEY" is not configured: the upstream-credentials secret has no entry of that name. Nothing was charged.',
        type: 'server_error',
        param: null,
        code: 'upstream_credential_missing',
      },
    });
    expect(text).not.toContain('sk-local-value');
    expect(await balanceNano(target, accountId)).toBe(before);
  });
});
