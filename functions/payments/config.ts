/**
 * The payments function's Stripe credentials. In Lambda: the Stripe secret (STRIPE_SECRET_ARN), a JSON
 * object `{"apiKey": "sk_...", "webhookSecret": "whsec_..."}` that the operator puts (docs/deploy.md),
 * read at the first webhook of an instance and every 5 minutes after; during a rotation of the
 * endpoint's signing secret it also holds the one being replaced, `"previousWebhookSecret"`, and a
 * signature made with either is accepted. Locally: STRIPE_API_KEY and STRIPE_WEBHOOK_SECRET (and
 * STRIPE_PREVIOUS_WEBHOOK_SECRET), with STRIPE_API_BASE pointing the SDK at the Stripe stand-in.
 */
import { getSecretString } from '../adapters/secrets.js';

export interface StripeSettings {
  apiKey: string;
  webhookSecret: string;
  /** The signing secret being rotated out, accepted as well until the operator removes it. */
  previousWebhookSecret?: string;
  /** The API's base URL (the local stand-in's); absent, api.stripe.com. */
  apiBase: string | undefined;
}

class StripeNotConfiguredError extends Error {
  constructor(what: string) {
    super(`Stripe is not configured: ${what}`);
    this.name = 'StripeNotConfiguredError';
  }
}

export async function stripeSettings(env: NodeJS.ProcessEnv = process.env): Promise<StripeSettings> {
  const apiBase = env.STRIPE_API_BASE || undefined;
  if (env.STRIPE_SECRET_ARN) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(await getSecretString(env.STRIPE_SECRET_ARN));
    } catch (error) {
      if (error instanceof SyntaxError) parsed = undefined;
      else throw error;
    }
    const { apiKey, webhookSecret, previousWebhookSecret } = (
      typeof parsed === 'object' && parsed !== null ? parsed : {}
    ) as Record<string, unknown>;
    if (typeof apiKey !== 'string' || !apiKey || typeof webhookSecret !== 'string' || !webhookSecret)
      throw new StripeNotConfiguredError(
        'the Stripe secret must be a JSON object with "apiKey" and "webhookSecret" (docs/deploy.md)',
      );
    if (previousWebhookSecret !== undefined && typeof previousWebhookSecret !== 'string')
      throw new StripeNotConfiguredError('the Stripe secret\'s "previousWebhookSecret" must be a string');
    return { apiKey, webhookSecret, ...previous(previousWebhookSecret), apiBase };
  }
  if (!env.STRIPE_API_KEY || !env.STRIPE_WEBHOOK_SECRET)
    throw new StripeNotConfiguredError('set STRIPE_API_KEY and STRIPE_WEBHOOK_SECRET (or STRIPE_SECRET_ARN)');
  return {
    apiKey: env.STRIPE_API_KEY,
    webhookSecret: env.STRIPE_WEBHOOK_SECRET,
    ...previous(env.STRIPE_PREVIOUS_WEBHOOK_SECRET),
    apiBase,
  };
}

/** The previous signing secret, when there is one (empty: none). */
const previous = (secret: string | undefined): { previousWebhookSecret?: string } =>
  secret ? { previousWebhookSecret: secret } : {};
