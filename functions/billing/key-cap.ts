/**
 * Per-key daily spend caps: the admission decision (core/store.ts, "KEY DAILY CAPS", says where the
 * day's spend lives and what it costs).
 *
 * The bound: a key's cap is shared out over its account's n balance slices (capShareNano: the
 * shares sum to the cap exactly). On slice i the key's day counter is what it has committed there
 * today: its settled charges plus its live holds. A request is refused (402, before the upstream)
 * when the counter has reached the share; any other places a hold of its worst case, one
 * conditional write that adds the hold to the counter only while the counter is below the share.
 * A bill is at most its hold and replaces it on the counter, so the counter never passes
 * share - 1 + one request's worst case: each slice ends at most one request's cost past its share,
 * and the key's spend in one UTC day is at most cap + n x one request's worst case (n = 1 for an
 * unsplit account). test/integration/key-cap.test.ts checks it over random interleavings and under
 * 200 concurrent requests.
 *
 * Why a capped key has no fast path (the balance's, holds.ts needsHold: no hold while what is left
 * covers maxConcurrency worst cases): requests served without a hold are not on the counter, and a
 * held request admitted meanwhile spends what they were admitted against. With maxConcurrency 2 and
 * a share of 100: A (worst case 50) goes fast at counter 0; B holds 99 and bills 99; C holds 100
 * (counter 99 < 100) and bills 100; A bills 50: 249 on a share of 100, past it by more than one
 * request's cost with never more than two requests in flight. With every capped request held, the
 * counter covers every request in flight. What it costs: one conditional write before the upstream
 * (the hold, 12-16 ms at 160 MB, holds.ts), on capped keys only; with maxConcurrency 1000 a fast
 * path would anyway need a share of 1000 worst cases (some $10 for a $0.01 request).
 */

import type { KeyCapView, Principal } from '../core/access.js';
import { KeyDailyCapError } from '../core/errors.js';
import { nanoToUsd } from '../core/money.js';
import { utcDay } from '../core/store.js';

const DAY_MS = 86_400_000;

/** The next 00:00 UTC after `nowMs` (epoch ms): when a key's daily cap resets. */
export const nextUtcMidnight = (nowMs: number): number => (Math.floor(nowMs / DAY_MS) + 1) * DAY_MS;

/** Slice `slice`'s share of a cap over `slices` slices: floor(cap / n), plus 1 for slice < cap mod n. */
export function capShareNano(capNano: bigint, slices: number, slice: number): bigint {
  const n = BigInt(Math.max(1, slices));
  return capNano / n + (BigInt(slice) < capNano % n ? 1n : 0n);
}

/** What a capped key's request on its slice comes to: refused (the share is spent today), or held. */
export interface CapAdmission {
  kind: 'reached' | 'hold';
  /** The slice's share of the cap. */
  shareNano: bigint;
  /** The key's counter on the slice for the request's day, as read. */
  spentNano: bigint;
}

/**
 * Whether the slice's share of the cap is reached today (the UTC day of `nowMs`, the request's own
 * start: its hold and charge count on that day's counter); if not, the request is held, its hold
 * conditioned on the counter being below `shareNano` still.
 */
export function capAdmission(cap: KeyCapView, slice: number, nowMs: number): CapAdmission {
  const shareNano = capShareNano(cap.capNano, cap.slices, slice);
  const spentNano = cap.spentByDay[dayOf(nowMs)] ?? 0n;
  return { kind: spentNano >= shareNano ? 'reached' : 'hold', shareNano, spentNano };
}

/** The UTC day (`YYYY-MM-DD`) of an instant: the day a charge or hold created then counts on. */
export const dayOf = (nowMs: number): string => utcDay(new Date(nowMs).toISOString());

/**
 * The 402 of a key whose daily spend cap is reached (core/errors.ts KeyDailyCapError says why 402):
 * the cap, the next 00:00 UTC after `nowMs`, the account's balance (over all its slices where the
 * read found it), and where the cap is raised or removed (`urls.caps`, the dashboard's Settings → API).
 */
export function refuseKeyCap(
  principal: Principal,
  nowMs: number,
  urls: { topUp: string; caps?: string | undefined },
): KeyDailyCapError {
  const balanceNano = principal.accountBalanceNano ?? principal.balanceNano;
  return new KeyDailyCapError(
    nanoToUsd(principal.keyCap?.capNano ?? 0n),
    new Date(nextUtcMidnight(nowMs)).toISOString(),
    nanoToUsd(balanceNano),
    urls,
  );
}
