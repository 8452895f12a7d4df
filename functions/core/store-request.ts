/**
 * What the request path (the completions function) uses of the store port (store.ts), and all its
 * store is typed as: the key's read, a hold placed or released, the settlement or its deferral to the
 * sweeper, and a refusal's balance. Its adapter composes these parts alone
 * (adapters/dynamodb/request-store.ts), so that its bundle, which every cold start parses, carries
 * none of the store's other parts (keys, corrections, activity, the dashboard's items, the team).
 */
import type { Store } from './store.js';

export type RequestPathStore = Pick<
  Store,
  | 'loadPrincipal'
  | 'placeHold'
  | 'releaseHold'
  | 'settleCharge'
  | 'deferSettlement'
  | 'recordUsageOnHold'
  | 'accountBalance'
>;
