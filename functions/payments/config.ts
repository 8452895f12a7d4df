/**
 * A function's Stripe credentials. Each function that calls Stripe has a restricted key of its own,
 * in a secret of its own that only its role may read (docs/deploy.md, "Connecting Stripe"): the
 * payments function (the webhook), the dashboard (Checkout), the balance watch (off-session
 * payments) and the reconciler (events). In Lambda: that secret (STRIPE_SECRET_ARN), a JSON object
 * `{"apiKey": "rk_..."}` that the operator puts, read at the first call of an instance and every 5
 * minutes after. The payments function's also holds the webhook endpoint's signing secret,
 * `"webhookSecret": "whsec_..."`, and during a rotation of it the one being replaced,
 * `"previousWebhookSecret"` (a signature made with either is accepted): webhookSettings. Locally:
 * STRIPE_API_KEY (each function's own key, lib/local/stack.ts), STRIPE_WEBHOOK_SECRET and
 * STRIPE_PREVIOUS_WEBHOOK_SECRET, with STRIPE_API_BASE pointing the SDK at the Stripe stand-in.
 */
import { getSecretString } from '../adapters/secrets.js';

export interface StripeSettings {
  apiKey: string;
  /** The API's base URL (the local stand-in's); absent, api.stripe.com. */
  apiBase: string | undefined;
}

export interface WebhookSettings extends StripeSettings {
  webhookSecret: string;
  /** The signing secret being rotated out, accepted as well until the operator removes it. */
  previousWebhookSecret?: string;
}

class StripeNotConfiguredError extends Error {
  constructor(what: string) {
    super(`Stripe is not configured: ${what}`);
    this.name = 'StripeNotConfiguredError';
  }
}

/** The secret's JSON object (`{}` for one that is not JSON, or not an object). */
async function secretObject(arn: string): Promise<Record<string, unknown>> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await getSecretString(arn));
  } catch (error) {
    if (error instanceof SyntaxError) parsed = undefined;
    else throw error;
  }
  return (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Record<string, unknown>;
}

/** The function's own Stripe key (and where the API is): what the dashboard, the watch and the reconciler need. */
export async function stripeSettings(env: NodeJS.ProcessEnv = process.env): Promise<StripeSettings> {
  const apiBase = env.STRIPE_API_BASE || undefined;
  if (env.STRIPE_SECRET_ARN) {
    const { apiKey } = await secretObject(env.STRIPE_SECRET_ARN);
    if (typeof apiKey !== 'string' || !apiKey)
      throw new StripeNotConfiguredError(
        'the Stripe secret must be a JSON object with "apiKey" (docs/deploy.md, "Connecting Stripe")',
      );
    return { apiKey, apiBase };
  }
  if (!env.STRIPE_API_KEY) throw new StripeNotConfiguredError('set STRIPE_API_KEY (or STRIPE_SECRET_ARN)');
  return { apiKey: env.STRIPE_API_KEY, apiBase };
}

/** The payments function's: its key, and the webhook endpoint's signing secret (and the previous one). */
export async function webhookSettings(env: NodeJS.ProcessEnv = process.env): Promise<WebhookSettings> {
  const apiBase = env.STRIPE_API_BASE || undefined;
  if (env.STRIPE_SECRET_ARN) {
    const { apiKey, webhookSecret, previousWebhookSecret } = await secretObject(env.STRIPE_SECRET_ARN);
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
