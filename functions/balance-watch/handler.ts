/**
 * The balance-watch function, run every minute by a schedule (lib/infra/balance-watch.ts) and by
 * `npm start`'s timer with the same code (watch.ts). Environment: the store's tables and DASHBOARD_TABLE;
 * ALERT_SENDER (a verified SES identity) and SES_ENDPOINT (when not SES's regional one); Stripe as the
 * payments function reads it (STRIPE_SECRET_ARN); BILLING_URL, the billing page the e-mails link.
 */ import middy from '@middy/core';
import { credentialsFromEnv, regionalHost } from '../adapters/dynamodb/connection.js';
import { getStore } from '../adapters/dynamodb/index.js';
import { WatchItems } from '../adapters/dynamodb/watch.js';
import { permanentSesError, sendEmail } from '../adapters/ses.js';
import { stripeSettings } from '../payments/config.js';
import { instanceSdk } from '../payments/sdk.js';
import { offSessionPayments } from '../payments/stripe-api.js';
import { logContext, logger, recordEmailsDeadLettered, recordWatchRun } from '../shared/observability.js';
import { sdkLookup } from './lookup.js';
import { runWatch, type WatchRun } from './watch.js';

const sdk = async () => instanceSdk(await stripeSettings());
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
    const billing = env.BILLING_URL ? { billingUrl: env.BILLING_URL } : {};
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
      ...billing,
      // An auto top-up whose outcome's event was lost: read from Stripe, applied as the webhook would.
      lookUpTopUp: async (watch) =>
        sdkLookup(await sdk(), {
          store,
          watches: watches as WatchItems,
          now: () => new Date().toISOString(),
          ...billing,
        })(watch),
    });
    logger.info('balance watch run', { ...result });
    recordWatchRun();
    recordEmailsDeadLettered(result.deadLettered);
    // A failure on an account or an e-mail fails the invocation (the Errors alarm); a dead letter does not.
    if (result.failures > 0) throw new Error(`balance watch: ${result.failures} failure(s), see the log`);
    return result;
  });
