/**
 * The charge the billed floor settles for every request (bare-proxy/billing.ts, billed-cpu.ts): fixed
 * figures of one svc-fast request, since the floor prices nothing. No imports, so that a bench can
 * take it beside another checkout's store adapter.
 */
export function floorCharge(principal: { accountId: string; keyId: string }, generationId: string) {
  return {
    accountId: principal.accountId,
    generationId,
    keyId: principal.keyId,
    tier: 'svc-fast',
    upstreamModel: 'sim-fast',
    promptTokens: 12,
    completionTokens: 16,
    cachedTokens: 0,
    upstreamCostUsd: '0.0000196',
    billedNano: 25_480n,
    estimated: false,
    finishReason: 'length' as const,
    createdAt: new Date().toISOString(),
  };
}
