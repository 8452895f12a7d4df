/**
 * How often the payments reconciler runs, in minutes: the CDK schedule and `npm start`'s timer (pure
 * data). Every 10 minutes: a payment the webhook missed is credited within about a quarter of an hour
 * (the run after its grace period, reconcile.ts), at six Stripe list calls an hour when nothing was
 * missed; Stripe keeps events 30 days, so even hours without a run lose nothing. The watch's own
 * lookup of an auto top-up (functions/balance-watch/) is the faster path for that case.
 */
export const RECONCILE_INTERVAL_MINUTES = 10;
