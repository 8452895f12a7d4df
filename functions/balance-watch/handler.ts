/**
 * The balance-watch function: run every minute by an EventBridge rule (lib/infra/balance-watch.ts),
 * and by `npm start`'s timer (lib/local/stack.ts) with the same code (watch.ts). Its settings, from the
 * environment:
 * - the store's four tables and DASHBOARD_TABLE (the watch items, functions/adapters/dynamodb/watch.ts);
 * - ALERT_SENDER: the From address of its e-mails, a verified SES identity (docs/deploy.md, "E-mail");
 * - SES_ENDPOINT: SES's endpoint when not `https://email.<AWS_REGION>.amazonaws.com` (the local stand-in);
 * - Stripe as the payments function reads it (functions/payments/config.ts): STRIPE_SECRET_ARN;
 * - BILLING_URL: the dashboard's billing page, linked from the e-mails.
 */
import middy from '@middy/core';
import type Stripe from 'stripe';
import { credentialsFromEnv, regionalHost } from '../adapters/dynamodb/connection.js';
import { getStore } from '../adapters/dynamodb/index.js';
import { WatchItems } from '../adapters/dynamodb/watch.js';
import { permanentSesError, sendEmail } from '../adapters/ses.js';
import { stripeSettings } from '../payments/config.js';
import { offSessionPayments, stripeClient } from '../payments/stripe-api.js';
import { logContext, logger, recordEmailsDeadLettered, recordWatchRun } from '../shared/observability.js';
import { sdkLookup } from './lookup.js';
import { runWatch, type WatchRun } from './watch.js';

/** One SDK client per instance, rebuilt only when the key changes (a rotation). */
let client: { apiKey: string; apiBase: string | undefined; sdk: Stripe } | undefined;
async function sdk(): Promise<Stripe> {
  const settings = await stripeSettings();
  if (client?.apiKey !== settings.apiKey || client.apiBase !== settings.apiBase)
    client = { apiKey: settings.apiKey, apiBase: settings.apiBase, sdk: stripeClient(settings) };
  return client.sdk;
}
const payments = async () => offSessionPayments(await sdk());

let watches: WatchItems | undefined;

export const handler = middy<unknown, WatchRun>()
  .use(logContext())
  .handler(async () => {
    const env = process.env;
    const region = env.AWS_REGION;
    const from = env.ALERT_SENDER;
    if (!region || !from) throw new Error('the balance watch needs AWS_REGION and ALERT_SENDER');
    const store = getStore();
    watches ??= new WatchItems({ client: store.client, tables: store.tables, wire: store.wire });
    const url = env.SES_ENDPOINT || `https://${regionalHost('email', region, env)}`;
    const result = await runWatch({
      watches,
      store,
      payments,
      mailer: {
        send: (email) => sendEmail({ url, region, credentials: () => credentialsFromEnv(env) }, email),
        permanent: permanentSesError,
      },
      from,
      now: () => new Date(),
      ...(env.BILLING_URL ? { billingUrl: env.BILLING_URL } : {}),
      // An auto top-up whose outcome's event was lost: read from Stripe, applied as the webhook would.
      lookUpTopUp: async (watch) =>
        sdkLookup(await sdk(), {
          store,
          watches: watches as WatchItems,
          now: () => new Date().toISOString(),
          ...(env.BILLING_URL ? { billingUrl: env.BILLING_URL } : {}),
        })(watch),
    });
    logger.info('balance watch run', { ...result });
    recordWatchRun();
    recordEmailsDeadLettered(result.deadLettered);
    // A run that failed on an account or an e-mail fails the invocation: the Errors alarm sees it (a
    // dead-lettered e-mail is not a failure: its own metric and alarm, EmailsDeadLettered).
    if (result.failures > 0) throw new Error(`balance watch: ${result.failures} failure(s), see the log`);
    return result;
  });
