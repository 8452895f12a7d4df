/**
 * Billing's two DynamoDB exchanges as a funded request makes them, through the service's own store
 * adapter, around a bare relay: the read of key and account before it, the settlement's transaction
 * (ledger entry and deduction) after it. No validation, pricing, usage parsing, middleware or
 * logging: what is left of the service's CPU above a floor billed this way is the service's own work.
 */
import { getRequestStore } from '../../functions/adapters/dynamodb/client.js';
import { hashKey } from '../../functions/core/auth.js';
import { newGenerationId } from '../../functions/core/ids.js';
import { floorCharge } from './floor-charge.js';
import type { FunctionUrlEvent } from './runtime.js';

export async function billed(event: FunctionUrlEvent, relay: () => Promise<void>): Promise<void> {
  const store = getRequestStore();
  const key = event.headers?.authorization?.replace(/^Bearer /, '') ?? '';
  const principal = await store.loadPrincipal(hashKey(key));
  if (!principal) throw new Error('the billed floor needs a valid key');
  await relay();
  await store.settleCharge(floorCharge(principal, newGenerationId()));
}
