import { usdToNano } from '../../functions/core/money.js';
import { listLedger } from '../../lib/admin/operations.js';
import { settled } from './settled.js';
import { balanceNano, type Target } from './target.js';

/** One request of a load and what its client saw. */
export interface Served {
  status: number;
  /** Started after an operator's command (a revoke, a suspension) had returned. */
  startedAfter: boolean;
  id?: string;
  costNano?: bigint;
}

/**
 * One small svc-fast completion (3-9 tokens, the simulator's directive) and what its client saw;
 * status 0 when the connection failed. The bench's load (bench/busy-account.ts) is made of these too.
 */
export async function completeOnce(
  target: Pick<Target, 'baseUrl'>,
  key: string,
  i: number,
  startedAfter = false,
): Promise<Served> {
  try {
    const response = await fetch(`${target.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'svc-fast',
        messages: [{ role: 'user', content: `busy ${i} [[sim:tokens=${3 + (i % 7)}]]` }],
      }),
    });
    const body = (await response.json()) as { id?: string; usage?: { cost?: number } };
    if (response.status !== 200) return { status: response.status, startedAfter };
    return { status: 200, startedAfter, id: String(body.id), costNano: usdToNano(String(body.usage?.cost)) };
  } catch {
    return { status: 0, startedAfter };
  }
}

/** What the ledger and the balance say about the generations served, once every settlement is done. */
export async function auditBilling(target: Target, accountId: string, before: bigint, served: Served[]) {
  await settled(target);
  const after = await balanceNano(target, accountId);
  const charges = (await listLedger(target.admin, accountId)).filter((e) => e.type === 'charge');
  const billed = new Set(charges.map((c) => c.entryId));
  const ok = served.filter((s) => s.status === 200);
  const statuses: Record<number, number> = {};
  for (const s of served) statuses[s.status] = (statuses[s.status] ?? 0) + 1;
  return {
    statuses,
    unbilled: ok.filter((s) => !billed.has(s.id ?? '')).length,
    duplicateCharges: charges.length - billed.size,
    balanceDropNano: before - after,
    ledgerSumNano: -charges.reduce((sum, c) => sum + c.deltaNano, 0n),
    servedCostNano: ok.reduce((sum, s) => sum + (s.costNano ?? 0n), 0n),
  };
}
