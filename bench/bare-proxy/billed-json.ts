/**
 * The JSON floor with billing's two DynamoDB exchanges: the bare JSON relay (json.ts), plus the
 * service's own store adapter doing what a funded request's billing does, the read of key and
 * account before the upstream call and the settlement's transaction (ledger entry and deduction)
 * after the reply. No validation, pricing, usage parsing, middleware or logging: what is left of the
 * service's CPU per JSON request above it is the service's own work.
 */
import { getStore } from '../../functions/adapters/dynamodb/client.js';
import { hashKey } from '../../functions/core/auth.js';
import { newGenerationId } from '../../functions/core/ids.js';
import { bodyOf, streamifyResponse, upstreamJson, withPrelude } from './runtime.js';

export const handler = streamifyResponse(async (event, responseStream) => {
  const store = getStore();
  const key = event.headers?.authorization?.replace(/^Bearer /, '') ?? '';
  const principal = await store.loadPrincipal(hashKey(key));
  if (!principal) throw new Error('the billed floor needs a valid key');
  const reply = await upstreamJson(bodyOf(event));
  const stream = withPrelude(responseStream, 200, { 'content-type': 'application/json' });
  stream.write(reply);
  stream.end();
  await store.settleCharge({
    accountId: principal.accountId,
    generationId: newGenerationId(),
    keyId: principal.keyId,
    tier: 'svc-fast',
    upstreamModel: 'sim-fast',
    promptTokens: 12,
    completionTokens: 16,
    cachedTokens: 0,
    upstreamCostUsd: '0.0000196',
    billedNano: 25_480n,
    estimated: false,
    finishReason: 'length',
    createdAt: new Date().toISOString(),
  });
});
