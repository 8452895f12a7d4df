/**
 * A generation's admission, before its upstream call: the fast path, a hold, or a refusal. Kept
 * beside generation.ts, which owns the hold once placed (its settlement or release).
 */
import { needsHold } from '../billing/holds.js';
import { capAdmission, refuseKeyCap } from '../billing/key-cap.js';
import { type Principal, refuseCredit, refuseStatus, withAccountBalance } from '../core/access.js';
import { ServiceUnavailableError } from '../core/errors.js';
import { type Hold, type HoldOutcome, sliceOf } from '../core/store.js';
import { logger } from '../shared/observability.js';
import type { GenerationPorts } from './config.js';
import type { Deadlines } from './deadlines.js';

/**
 * The fast path or a hold (billing/holds.ts): an account whose available credit covers every request
 * that can run at once is served on its one read (undefined: no hold); any other places a hold first,
 * one conditional write, refused (402) when the credit is all held. A capped key's request
 * (billing/key-cap.ts) is refused (402) when its share of the cap on the slice is spent today (the
 * UTC day of the generation's start, the clock's), else always held, its hold on the key's day
 * counter and conditioned on it. A database failure here is a 503; `onLost` is handed the hold then
 * (its write may have committed with only its answer lost). With caps off (config.keyDailyCaps, the
 * default) a key's stored cap is not read at all: the key is admitted as any other.
 */
export async function admit(
  generation: { id: string; caller: Principal; deadlines: Deadlines; worstCaseNano: bigint },
  ports: Pick<GenerationPorts, 'store' | 'config'>,
  onLost: (hold: Hold) => void,
): Promise<Hold | undefined> {
  const { caller, deadlines, worstCaseNano: amountNano } = generation;
  const { config, store } = ports;
  const startedAt = deadlines.startedAt;
  // Nothing of this for a key without a cap, or with caps off: the request path is then unchanged.
  const cap =
    config.keyDailyCaps && caller.keyCap
      ? capAdmission(caller.keyCap, caller.slice ?? 0, startedAt)
      : undefined;
  if (cap?.kind === 'reached') throw await refusal('capped', caller, ports, startedAt);
  // A capped key's request is always held (billing/key-cap.ts says why): its hold is on the counter.
  if (!cap && !needsHold(caller, amountNano, config.maxConcurrency)) return undefined;
  const hold: Hold = {
    accountId: caller.accountId,
    holdId: generation.id,
    ...sliceOf(caller),
    amountNano,
    expiresAt: deadlines.holdExpiresAt,
    createdAt: new Date(startedAt).toISOString(),
    ...(cap ? { keyId: caller.keyId } : {}),
  };
  let placed: HoldOutcome;
  try {
    // No upstream attempt starts after its deadline: a hold is no use past it.
    placed = await store.placeHold(hold, {
      deadline: deadlines.upstream,
      ...(cap ? { capShareNano: cap.shareNano } : {}),
    });
  } catch (error) {
    logger.error('hold write failed', { error: error instanceof Error ? error : String(error) });
    // The write may have committed with only its answer lost (a database that answers after the
    // deadline): the hold is given back as the 503 goes out, if it is there. Else it would hold the
    // credit until it expires (the function's timeout and more) and the sweeper would count it as
    // a request never billed. A commit that lands after this release is left to the sweeper.
    onLost(hold);
    throw new ServiceUnavailableError({ cause: error });
  }
  if (placed !== 'held') throw await refusal(placed, caller, ports, startedAt);
  return hold;
}

/**
 * Why a hold was refused, as the client is told: credit (402), the key's cap on this slice spent
 * between the read and the hold (402), or the account suspended or banned since its read (403: the
 * hold's condition checks status, credit and cap together). A 402 states the account's balance.
 */
async function refusal(
  placed: Exclude<HoldOutcome, 'held'>,
  caller: Principal,
  ports: Pick<GenerationPorts, 'store' | 'config'>,
  startedAt: number,
): Promise<Error> {
  if (placed !== 'refused' && placed !== 'capped') return refuseStatus(placed);
  const principal = await withAccountBalance(caller, ports.store);
  const { topUpUrl, keyCapsUrl } = ports.config;
  return placed === 'capped'
    ? refuseKeyCap(principal, startedAt, { topUp: topUpUrl, caps: keyCapsUrl })
    : refuseCredit(principal, topUpUrl);
}
