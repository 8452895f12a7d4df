/**
 * What the payments webhook counts, as CloudWatch metrics (EMF, namespace HostedModelApi) that
 * lib/infra/alarms.ts alarms on, and as in-process counters for tests. Each is logged too, with the
 * event's id and type, the account id and the Stripe object's id (never a card detail or a secret).
 */
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { logger } from '../shared/observability.js';

/** The metric names, which the stack's alarms name too. */
export const PAYMENT_METRICS = {
  /** A webhook answered 500 (a store or Stripe call failed): Stripe sends it again, with backoff, for 3 days. */
  failures: 'PaymentsWebhookFailures',
  /** A request without a valid, fresh Stripe signature: answered 400, nothing written. */
  signatureFailures: 'PaymentsSignatureFailures',
  /**
   * A payment that names no account, one the store does not have, or one its PaymentIntent does not
   * agree with; or an amount in a currency other than USD: answered 200 (Stripe must not retry), nothing
   * written, for an operator to look at.
   */
  unknownAccounts: 'PaymentsUnknownAccounts',
  /** A dispute opened: its amount taken back and the account suspended until an operator acts. */
  disputes: 'PaymentsDisputes',
  /** Credit added by a payment (count), for dashboards. */
  credited: 'PaymentsCredited',
  /**
   * An event the webhook had not applied, applied by the reconciler or the balance watch's lookup
   * (credit added or taken back, an auto top-up switched off): the webhook is missing events.
   */
  reconciled: 'PaymentsReconciled',
  /** A reconciler run that finished: its heartbeat (the "not running" alarm watches for none in an hour). */
  reconcilerRuns: 'PaymentsReconcilerRuns',
} as const;

type PaymentMetric = keyof typeof PAYMENT_METRICS;

/** Counts since the module loaded, for tests. */
export const paymentCounters: Record<PaymentMetric, number> = {
  failures: 0,
  signatureFailures: 0,
  unknownAccounts: 0,
  disputes: 0,
  credited: 0,
  reconciled: 0,
  reconcilerRuns: 0,
};

const metrics = new Metrics({
  namespace: process.env.POWERTOOLS_METRICS_NAMESPACE ?? 'HostedModelApi',
  serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? 'hosted-model-api',
});

/** Counts one occurrence and logs it: a warning, or an error for a failure. */
export function recordPayment(
  metric: PaymentMetric,
  message: string,
  details: Record<string, unknown>,
): void {
  paymentCounters[metric] += 1;
  if (metric === 'failures') logger.error(message, details);
  else if (metric === 'credited' || metric === 'reconcilerRuns') logger.info(message, details);
  else logger.warn(message, details);
  metrics.addMetric(PAYMENT_METRICS[metric], MetricUnit.Count, 1);
  metrics.publishStoredMetrics();
}
