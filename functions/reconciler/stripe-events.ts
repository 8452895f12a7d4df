/**
 * The reconciler's one Stripe list call, on the official SDK: `GET /v1/events` with
 * `delivery_success=false`, the handled `types`, a `created` window and Stripe's pagination.
 */
import type Stripe from 'stripe';
import type { StripeEventSource } from './reconcile.js';

export function stripeEvents(client: Stripe): StripeEventSource {
  return {
    async listUndelivered(params) {
      const list = await client.events.list({
        types: [...params.types],
        delivery_success: false,
        created: { gte: params.createdGte, lte: params.createdLte },
        limit: params.limit,
        ...(params.startingAfter ? { starting_after: params.startingAfter } : {}),
      });
      return {
        events: list.data.map((event) => ({
          id: event.id,
          type: event.type,
          created: event.created,
          data: { object: event.data.object },
        })),
        hasMore: list.has_more,
      };
    },
  };
}
