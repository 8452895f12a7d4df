/**
 * The balance watch's dependencies in Lambda (handler.ts): its store and watch items on the wire, SES
 * signed with the role's credentials, Stripe with the watch's own restricted key. Environment: the
 * store's tables and DASHBOARD_TABLE; ALERT_SENDER (a verified SES identity) and SES_ENDPOINT (when
 * not SES's regional one); STRIPE_SECRET_ARN; BILLING_URL, the billing page the e-mails link.
 */
import { credentialsFromEnv, regionalHost } from '../adapters/dynamodb/connection.js';
import { getStore } from '../adapters/dynamodb/index.js';
import { WatchItems } from '../adapters/dynamodb/watch.js';
import { permanentSesError, sendEmail } from '../adapters/ses.js';
import { stripeSettings } from '../payments/config.js';
import { instanceSdk } from '../payments/sdk.js';
import { offSessionPayments } from '../payments/stripe-api.js';
import { sdkLookup } from './lookup.js';
import type { WatchDeps } from './watch.js';

const sdk = async () => instanceSdk(await stripeSettings());
const payments = async () => offSessionPayments(await sdk());

let watches: WatchItems | undefined;

export function watchDeps(env: NodeJS.ProcessEnv = process.env): WatchDeps {
  const region = env.AWS_REGION;
  const from = env.ALERT_SENDER;
  if (!region || !from) throw new Error('the balance watch needs AWS_REGION and ALERT_SENDER');
  const store = getStore();
  watches ??= new WatchItems({ client: store.client, tables: store.tables, wire: store.wire });
  const items = watches;
  const url = env.SES_ENDPOINT || `https://${regionalHost('email', region, env)}`;
  const billing = env.BILLING_URL ? { billingUrl: env.BILLING_URL } : {};
  return {
    watches: items,
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
        watches: items,
        now: () => new Date().toISOString(),
        audited: true,
        ...billing,
      })(watch),
  };
}
