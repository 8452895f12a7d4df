/**
 * The payments function: Stripe's webhook (a buffered Function URL). Its Stripe credentials come from
 * Secrets Manager (config.ts), the ledger writes go through the same store port as the API's. Two
 * checks, in this order: CloudFront's secret origin header, as the API's functions require it (a
 * request to the bare Function URL, which WAF never sees, is a 403 before any work), then Stripe's
 * signature, the request's authentication (webhook.ts).
 */
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { getStore } from '../adapters/dynamodb/index.js';
import { WatchItems, watchTableConfigured } from '../adapters/dynamodb/watch.js';
import { originVerifyValues } from '../adapters/secrets.js';
import {
  type FunctionUrlEvent,
  type FunctionUrlResult,
  httpErrorHandler,
  originVerify,
} from '../shared/http.js';
import { logContext } from '../shared/observability.js';
import { webhookSettings } from './config.js';
import { recordPayment } from './metrics.js';
import { instanceSdk } from './sdk.js';
import { stripeApi } from './stripe-api.js';
import { handleWebhook } from './webhook.js';

/** The balance watch's items (a saved card, an auto top-up's outcome): where a dashboard is deployed. */
let watches: WatchItems | undefined;
async function webhook(event: FunctionUrlEvent): Promise<FunctionUrlResult> {
  let settings: Awaited<ReturnType<typeof webhookSettings>>;
  try {
    settings = await webhookSettings();
  } catch (error) {
    recordPayment('failures', 'stripe webhook: no Stripe credentials', { error });
    return {
      statusCode: 500,
      headers: { 'content-type': 'application/json' },
      body: '{"error":"not configured"}',
    };
  }
  return handleWebhook(event, {
    store: getStore(),
    stripe: stripeApi(instanceSdk(settings)),
    webhookSecret: settings.webhookSecret,
    previousWebhookSecret: settings.previousWebhookSecret,
    now: () => new Date().toISOString(),
    ...withWatches(),
  });
}

function withWatches(): { watches?: WatchItems; billingUrl?: string } {
  const billingUrl = process.env.BILLING_URL || process.env.TOP_UP_URL;
  if (watchTableConfigured()) watches ??= new WatchItems(getStore());
  return { ...(watches ? { watches } : {}), ...(billingUrl ? { billingUrl } : {}) };
}

export const handler = middy<FunctionUrlEvent, FunctionUrlResult, Error, Context>()
  .use(logContext())
  .use(httpErrorHandler())
  .use(originVerify(originVerifyValues))
  .handler(webhook);
