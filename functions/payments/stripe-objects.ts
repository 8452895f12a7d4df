/**
 * The shapes the payments code reads Stripe's events and objects by (an event's object is untyped
 * JSON: each field is read as what it must be, or as absent), and what applying one came to.
 */

/** The signed event, as far as this code reads it. */
export interface StripeEventView {
  id: string;
  type: string;
  data: { object: unknown };
}

export type PaymentOutcome =
  | { kind: 'credited' | 'already-credited'; accountId: string; paymentIntent: string; cents: number }
  | { kind: 'awaiting-payment' | 'payment-failed'; session: string }
  | { kind: 'refunds'; accountId: string; charge: string; applied: string[]; cents: number }
  | { kind: 'disputed'; accountId: string; dispute: string; applied: boolean }
  | { kind: 'auto-top-up-off'; accountId: string; switched: boolean }
  | { kind: 'not-credited'; reason: string }
  | { kind: 'ignored'; reason: string };

export type StripeObject = Record<string, unknown>;

export const asObject = (value: unknown): StripeObject =>
  typeof value === 'object' && value !== null ? (value as StripeObject) : {};
export const text = (value: unknown): string | undefined =>
  typeof value === 'string' && value !== '' ? value : undefined;
/** An expandable field: the id, or the expanded object's id. */
export const idOf = (value: unknown): string | undefined => text(value) ?? text(asObject(value).id);
