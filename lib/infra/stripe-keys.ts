/**
 * The Stripe keys' secrets: one for each function that calls Stripe, each holding a restricted key
 * with only what that function's calls need (docs/deploy.md, "Connecting Stripe", lists each key's
 * permissions), and each readable by its function's role alone. Created as `{}`: the operator puts
 * each key after the first deploy, and until then that function's Stripe calls fail (the webhook
 * answers 500, and Stripe keeps the event for later).
 */
import type { RemovalPolicy } from 'aws-cdk-lib';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';

/** Who has a Stripe key of its own, with the construct id of its secret and what goes in it. */
const STRIPE_KEY_SECRETS = {
  // The webhook's: the id the single Stripe secret had, so that a deployed stack keeps its value.
  payments: {
    id: 'StripeCredentials',
    holds:
      '{"apiKey": "rk_...", "webhookSecret": "whsec_..."} (and "previousWebhookSecret" during a rotation)',
  },
  dashboard: { id: 'StripeDashboardKey', holds: '{"apiKey": "rk_..."}: Checkout Sessions' },
  watch: { id: 'StripeWatchKey', holds: '{"apiKey": "rk_..."}: off-session PaymentIntents' },
  reconciler: { id: 'StripeReconcilerKey', holds: '{"apiKey": "rk_..."}: events and what they name' },
} as const;

export type StripeKeyHolder = keyof typeof STRIPE_KEY_SECRETS;

/** The secret of `holder`'s restricted Stripe key, created as `{}`. */
export function stripeKeySecret(
  scope: Construct,
  holder: StripeKeyHolder,
  removalPolicy: RemovalPolicy,
): Secret {
  const { id, holds } = STRIPE_KEY_SECRETS[holder];
  return new Secret(scope, id, {
    description: `Stripe, the ${holder} function's restricted key: ${holds} (docs/deploy.md, "Connecting Stripe")`,
    secretObjectValue: {},
    removalPolicy,
  });
}
