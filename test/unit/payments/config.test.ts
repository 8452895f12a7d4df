/**
 * The payments function's Stripe settings (functions/payments/config.ts): the Stripe secret's JSON,
 * with the previous webhook signing secret during a rotation, and the local environment's variables.
 */
import { beforeEach, describe, expect, it, vi } from 'vitest';

const secret = vi.hoisted(() => ({ value: '{}' }));
vi.mock('../../../functions/adapters/secrets.js', () => ({
  getSecretString: async () => secret.value,
}));

const { stripeSettings } = await import('../../../functions/payments/config.js');

const ARN = { STRIPE_SECRET_ARN: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:stripe' };

beforeEach(() => {
  secret.value = '{}';
});

describe('stripeSettings', () => {
  it('reads the key and the signing secret; the previous signing secret only when the secret holds one', async () => {
    secret.value = JSON.stringify({ apiKey: 'sk_live_a', webhookSecret: 'whsec_new' });
    const plain = await stripeSettings(ARN);
    expect(plain).toEqual({ apiKey: 'sk_live_a', webhookSecret: 'whsec_new', apiBase: undefined });
    secret.value = JSON.stringify({
      apiKey: 'sk_live_a',
      webhookSecret: 'whsec_new',
      previousWebhookSecret: 'whsec_old',
    });
    expect(await stripeSettings(ARN)).toMatchObject({
      webhookSecret: 'whsec_new',
      previousWebhookSecret: 'whsec_old',
    });
    secret.value = JSON.stringify({
      apiKey: 'sk_live_a',
      webhookSecret: 'whsec_new',
      previousWebhookSecret: '',
    });
    expect(await stripeSettings(ARN)).not.toHaveProperty('previousWebhookSecret');
  });

  it('refuses a secret without the key or the signing secret, or with a previous one that is not a string', async () => {
    secret.value = JSON.stringify({ apiKey: 'sk_live_a' });
    await expect(stripeSettings(ARN)).rejects.toThrow(/"apiKey" and "webhookSecret"/);
    secret.value = JSON.stringify({
      apiKey: 'sk_live_a',
      webhookSecret: 'whsec_new',
      previousWebhookSecret: 1,
    });
    await expect(stripeSettings(ARN)).rejects.toThrow(/previousWebhookSecret/);
  });

  it('locally, from the environment', async () => {
    const env = { STRIPE_API_KEY: 'sk_test_local', STRIPE_WEBHOOK_SECRET: 'whsec_local' };
    expect(await stripeSettings(env)).not.toHaveProperty('previousWebhookSecret');
    expect(await stripeSettings({ ...env, STRIPE_PREVIOUS_WEBHOOK_SECRET: 'whsec_before' })).toMatchObject({
      webhookSecret: 'whsec_local',
      previousWebhookSecret: 'whsec_before',
    });
  });
});
