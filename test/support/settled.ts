import { listLedger } from '../../lib/admin/operations.js';
import type { Target } from './target.js';

/**
 * Waits until the target has finished every request sent so far, the work after each reply (a
 * completion's settlement) included: a reply reaches the client before its settlement is written.
 * Locally the emulator knows; against a deployed stack a settlement is a few round trips, so this
 * waits a bounded moment and callers that need a charge poll for it.
 */
export async function settled(target: Target): Promise<void> {
  if (target.local) await target.local.emulator.quiescent();
  else await new Promise((resolve) => setTimeout(resolve, 1_000));
}

/** The account's ledger once every request sent so far is settled. */
export async function ledgerOf(target: Target, accountId: string) {
  await settled(target);
  return listLedger(target.admin, accountId);
}
