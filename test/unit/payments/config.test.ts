/**
 * The functions' Stripe settings (functions/payments/config.ts): each function's own secret's JSON
 * (its restricted key; the payments function's with the webhook signing secret, and the previous one
 * during a rotation), and the local environment's variables.
 */
import { beforeEach, describe, expect, it, vi } from 'vitest';

const secret = vi.hoisted(() => ({ value: '{}' }));
vi.mock('../../../functions/adapters/secrets.js', () => ({
  getSecretString: async () => secret.value,
}));

const { stripeSettings, webhookSettings } = await import('../../../functions/payments/config.js');

const ARN = { STRIPE_SECRET_ARN: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:stripe' };

beforeEach(() => {
  secret.value = '{}';
});

describe('webhookSettings', () => {
  it('reads the key and the signing secret; the previous signing secret only when the secret holds one', async () => {
    secret.value = JSON.stringify({ apiKey: 'sk_live_a', webhookSecret: 'whsec_new' });
    const plain = await webhookSettings(ARN);
    expect(plain).toEqual({ apiKey: 'sk_live_a', webhookSecret: 'whsec_new', apiBase: undefined });
    secret.value = JSON.stringify({
      apiKey: 'sk_live_a',
      webhookSecret: 'whsec_new',
      previousWebhookSecret: 'whsec_old',
    });
    expect(await webhookSettings(ARN)).toMatchObject({
      webhookSecret: 'whsec_new',
      previousWebhookSecret: 'whsec_old',
    });
    secret.value = JSON.stringify({
      apiKey: 'sk_live_a',
      webhookSecret: 'whsec_new',
      previousWebhookSecret: '',
    });
    expect(await webhookSettings(ARN)).not.toHaveProperty('previousWebhookSecret');
  });

  it('refuses a secret without the key or the signing secret, or with a previous one that is not a string', async () => {
    secret.value = JSON.stringify({ apiKey: 'sk_live_a' });
    await expect(webhookSettings(ARN)).rejects.toThrow(/"apiKey" and "webhookSecret"/);
    secret.value = JSON.stringify({
      apiKey: 'sk_live_a',
      webhookSecret: 'whsec_new',
      previousWebhookSecret: 1,
    });
    await expect(webhookSettings(ARN)).rejects.toThrow(/previousWebhookSecret/);
  });

  it('locally, from the environment', async () => {
    const env = { STRIPE_API_KEY: 'sk_test_local', STRIPE_WEBHOOK_SECRET: 'whsec_local' };
    expect(await webhookSettings(env)).not.toHaveProperty('previousWebhookSecret');
    expect(await webhookSettings({ ...env, STRIPE_PREVIOUS_WEBHOOK_SECRET: 'whsec_before' })).toMatchObject({
      webhookSecret: 'whsec_local',
      previousWebhookSecret: 'whsec_before',
    });
  });
});

describe('stripeSettings', () => {
  it('needs only the key: the dashboard, the watch and the reconciler hold no signing secret', async () => {
    secret.value = JSON.stringify({ apiKey: 'rk_live_watch' });
    expect(await stripeSettings(ARN)).toEqual({ apiKey: 'rk_live_watch', apiBase: undefined });
    expect(
      await stripeSettings({ STRIPE_API_KEY: 'rk_test_local', STRIPE_API_BASE: 'http://127.0.0.1:1' }),
    ).toEqual({ apiKey: 'rk_test_local', apiBase: 'http://127.0.0.1:1' });
  });

  it('refuses a secret without the key', async () => {
    secret.value = '{}';
    await expect(stripeSettings(ARN)).rejects.toThrow(/"apiKey"/);
    secret.value = 'not json';
    await expect(stripeSettings(ARN)).rejects.toThrow(/"apiKey"/);
    await expect(stripeSettings({})).rejects.toThrow(/STRIPE_API_KEY/);
  });
});
