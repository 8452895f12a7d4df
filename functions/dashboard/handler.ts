/**
 * The dashboard function (a buffered Function URL behind `/dashboard/*`): the Hono app (app.tsx) on
 * Hono's Lambda adapter (payload 2.0, its `cookies` in and out). Its OpenID client and Stripe client
 * are made at first use and kept for the instance.
 */
import { handle } from 'hono/aws-lambda';
import { getStore } from '../adapters/dynamodb/index.js';
import { WatchItems } from '../adapters/dynamodb/watch.js';
import { originVerifyValues } from '../adapters/secrets.js';
import { stripeSettings } from '../payments/config.js';
import { type StripeApi, stripeApi, stripeClient } from '../payments/stripe-api.js';
import { keyDailyCapsOn } from '../shared/env.js';
import { createDashboardApp } from './app.js';
import {
  checkoutOrigins,
  DASHBOARD_STRIPE_NETWORK,
  oidcSettings,
  publicOrigin,
  signOutOrigin,
} from './config.js';
import { type OidcClient, openIdClient } from './oidc.js';

let oidc: Promise<OidcClient> | undefined;
/** Discovery once per instance; a failed one is tried again at the next sign-in. */
function oidcClient(): Promise<OidcClient> {
  oidc ??= oidcSettings()
    .then((settings) => openIdClient(settings))
    .catch((error: unknown) => {
      oidc = undefined;
      throw error;
    });
  return oidc;
}

/** One Stripe client per instance, rebuilt only when its key changes (a rotation). */
let stripe: { apiKey: string; api: StripeApi } | undefined;
async function stripeFor(): Promise<StripeApi> {
  const settings = await stripeSettings();
  if (stripe?.apiKey !== settings.apiKey)
    stripe = {
      apiKey: settings.apiKey,
      api: stripeApi(stripeClient({ ...settings, network: DASHBOARD_STRIPE_NETWORK })),
    };
  return stripe.api;
}

const store = getStore();
const app = createDashboardApp({
  store,
  watches: new WatchItems({ client: store.client, tables: store.tables, wire: store.wire }),
  oidc: oidcClient,
  stripe: stripeFor,
  publicOrigin: publicOrigin(),
  checkoutOrigins: checkoutOrigins(),
  signOutOrigin: signOutOrigin(),
  originVerify: () => originVerifyValues(),
  keyDailyCaps: keyDailyCapsOn(),
});

export const handler = handle(app);
