import { describe, expect, it } from 'vitest';
import { resources, synthStages } from './synth-offline.js';

/**
 * The functions' run-time calls to Secrets Manager, held to their roles as DynamoDB's are locally
 * (lib/local/iam.ts holds those): locally a function reads its secrets from the environment and calls
 * nothing, so the template is where this is checked. Each secret a function is told of (an
 * environment variable ending in `_SECRET_ARN`) it may read, and no other.
 */
const stackOf = synthStages();

type Resource = { Type: string; Properties?: Record<string, unknown> };

function secretGrants(all: Record<string, Resource>, role: string): string[] {
  return Object.values(all)
    .filter(
      (r) =>
        r.Type === 'AWS::IAM::Policy' &&
        ((r.Properties?.Roles as { Ref?: string }[] | undefined) ?? []).some((x) => x.Ref === role),
    )
    .flatMap(
      (r) =>
        (r.Properties as { PolicyDocument: { Statement: { Action: unknown; Resource: unknown }[] } })
          .PolicyDocument.Statement,
    )
    .filter((s) => [s.Action].flat().includes('secretsmanager:GetSecretValue'))
    .flatMap((s) => [s.Resource].flat().map((x) => JSON.stringify(x)))
    .sort();
}

describe('secrets at run time', () => {
  it.each(['sandbox', 'prod'] as const)(
    'each function may read exactly the secrets its environment names (%s)',
    (stage) => {
      const all = resources(stackOf(stage).template) as Record<string, Resource>;
      let named = 0;
      for (const [id, fn] of Object.entries(all)) {
        if (fn.Type !== 'AWS::Lambda::Function') continue;
        const variables = ((fn.Properties?.Environment as { Variables?: Record<string, unknown> } | undefined)
          ?.Variables ?? {}) as Record<string, unknown>;
        const secrets = Object.entries(variables)
          .filter(([name]) => name.endsWith('_SECRET_ARN'))
          .map(([, value]) => JSON.stringify(value))
          .sort();
        named += secrets.length;
        const role = (fn.Properties?.Role as { 'Fn::GetAtt'?: [string, string] } | undefined)?.[
          'Fn::GetAtt'
        ]?.[0];
        if (!role) continue;
        expect(secretGrants(all, role), id).toEqual([...new Set(secrets)]);
      }
      // The completions and models functions read the origin secret, completions the upstream keys.
      expect(named).toBeGreaterThanOrEqual(3);
    },
  );

  it.each(['sandbox', 'prod'] as const)(
    'each function that calls Stripe reads a restricted key of its own, in its own secret (%s)',
    (stage) => {
      const all = resources(stackOf(stage).template) as Record<string, Resource>;
      const stripeSecretOf: Record<string, string> = {};
      for (const [id, fn] of Object.entries(all)) {
        if (fn.Type !== 'AWS::Lambda::Function') continue;
        const variables = ((fn.Properties?.Environment as { Variables?: Record<string, unknown> } | undefined)
          ?.Variables ?? {}) as Record<string, { Ref?: string } | undefined>;
        const ref = variables.STRIPE_SECRET_ARN?.Ref;
        if (ref) stripeSecretOf[id.replace(/[0-9A-F]{8}$/, '')] = ref.replace(/[0-9A-F]{8}$/, '');
      }
      // Each function's own secret (lib/infra/stripe-keys.ts); the dashboard and the balance watch are
      // deployed only where the dashboard is (prod: its custom domain).
      expect(stripeSecretOf).toEqual({
        PaymentsFunction: 'StripeCredentials',
        PaymentsReconcilerFunction: 'StripeReconcilerKey',
        ...(stage === 'prod'
          ? { DashboardFunction: 'StripeDashboardKey', BalanceWatchFunction: 'StripeWatchKey' }
          : {}),
      });
      for (const secret of Object.values(stripeSecretOf))
        expect(all[Object.keys(all).find((id) => id.startsWith(secret)) ?? '']?.Properties).toMatchObject({
          SecretString: '{}',
        });
    },
  );
});
