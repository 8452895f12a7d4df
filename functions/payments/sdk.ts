/**
 * The Stripe SDK client of a function instance (the webhook, the balance watch, the reconciler): one
 * per instance, rebuilt only when the key or the API base changes (a rotation of the secret).
 */
import type Stripe from 'stripe';
import type { StripeSettings } from './config.js';
import { stripeClient } from './stripe-api.js';

let client: { apiKey: string; apiBase: string | undefined; sdk: Stripe } | undefined;

export function instanceSdk(settings: StripeSettings): Stripe {
  if (client?.apiKey !== settings.apiKey || client.apiBase !== settings.apiBase)
    client = { apiKey: settings.apiKey, apiBase: settings.apiBase, sdk: stripeClient(settings) };
  return client.sdk;
}
