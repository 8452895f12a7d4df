/**
 * The payments reconciler's function: run every RECONCILE_INTERVAL_MINUTES by an EventBridge
 * Scheduler schedule (lib/infra/reconciler.ts), and by `npm start`'s timer (lib/local/stack.ts) with
 * the same code (reconcile.ts). Its settings, from the environment: the store's tables; Stripe as the
 * payments function reads it (functions/payments/config.ts: STRIPE_SECRET_ARN); where a dashboard is
 * deployed, DASHBOARD_TABLE (an auto top-up's in-flight mark, a saved card) and BILLING_URL.
 */
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { getStore } from '../adapters/dynamodb/index.js';
import { WatchItems, watchTableConfigured } from '../adapters/dynamodb/watch.js';
import { stripeSettings } from '../payments/config.js';
import { recordPayment } from '../payments/metrics.js';
import { instanceSdk } from '../payments/sdk.js';
import { stripeApi } from '../payments/stripe-api.js';
import { logContext, logger } from '../shared/observability.js';
import { ledgerCheckpoints } from './checkpoint.js';
import { type ReconcileRun, RUN_BUDGET_MS, reconcile } from './reconcile.js';
import { stripeEvents } from './stripe-events.js';

let watches: WatchItems | undefined;

/** What is kept of the function's time after the run's budget: the last page's writes and the checkpoint. */
const MARGIN_MS = 15_000;

export const handler = middy<unknown, ReconcileRun, Error, Context>()
  .use(logContext())
  .handler(async (_event, context) => {
    const settings = await stripeSettings();
    const sdk = instanceSdk(settings);
    const store = getStore();
    if (watchTableConfigured()) watches ??= new WatchItems(store);
    const billingUrl = process.env.BILLING_URL;
    const remaining = context?.getRemainingTimeInMillis?.() ?? RUN_BUDGET_MS + MARGIN_MS;
    const result = await reconcile({
      payments: {
        store,
        stripe: stripeApi(sdk),
        now: () => new Date().toISOString(),
        audited: true,
        ...(watches ? { watches } : {}),
        ...(billingUrl ? { billingUrl } : {}),
      },
      events: stripeEvents(sdk),
      checkpoints: ledgerCheckpoints(store),
      nowMs: () => Date.now(),
      budgetMs: Math.min(RUN_BUDGET_MS, remaining - MARGIN_MS),
    });
    // A run that could not apply an event fails the invocation: the Errors alarm sees it.
    if (result.failures > 0) {
      logger.error('payments reconciler run', { ...result });
      throw new Error(`reconciler: ${result.failures} event(s) not applied, see the log`);
    }
    recordPayment('reconcilerRuns', 'payments reconciler run', { ...result });
    return result;
  });
