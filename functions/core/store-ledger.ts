/**
 * The store's ledger entries as the port returns them (core/store.ts), and what orders, pages and
 * groups them by day (the Activity page, the billing history), and the ids of top-ups and corrections.
 */
import { byBytes } from './strings.js';

export interface LedgerEntry {
  entryId: string;
  type: 'charge' | 'topup' | 'correction';
  createdAt: string;
  /** Signed change to the balance in nano-USD: a top-up is positive, a charge or a correction negative. */
  deltaNano: bigint;
  tier?: string;
  keyId?: string;
  user?: string;
  promptTokens?: number;
  completionTokens?: number;
  cachedTokens?: number;
  estimated?: boolean;
  usageAdjusted?: string;
  finishReason?: string;
  reference?: string;
}

/** One UTC day's spend (nano-USD) by tier: Store.dailySpend. */
export interface DaySpend {
  day: string;
  byTier: Record<string, bigint>;
}

/** A page of the account's charges, newest first (newestFirst); `next` while there may be more. */
export interface ChargePage {
  charges: LedgerEntry[];
  next?: string;
}

/** The one day of the Activity chart, totals and export: the UTC date (`YYYY-MM-DD`) of an ISO time. */
export function utcDay(iso: string): string {
  const at = Date.parse(iso);
  return Number.isNaN(at) ? '1970-01-01' : new Date(at).toISOString().slice(0, 10);
}

/**
 * Activity's order, newest first: by the time the charge's request started (its createdAt, to the
 * millisecond), then by id. A generation id names only its second (`gen-<unix seconds>-<random>`), so
 * ids alone order the charges of one second at random.
 */
export function newestFirst(a: Pick<LedgerEntry, 'createdAt' | 'entryId'>, b: typeof a): number {
  const at = (entry: typeof a) => Date.parse(entry.createdAt) || 0;
  return at(b) - at(a) || byBytes(b.entryId, a.entryId);
}

/** The second a generation id names (`gen-<unix seconds>-...`): its digits, as they sort. */
export const secondOfId = (entryId: string): string => entryId.slice(4, 14);

/**
 * Where a page after the cursor `after` (a charge id a previous page ended on) starts: that charge's
 * place in newestFirst, taken from `known` (entries read that may include it); one not found stands
 * as if made at the end of its id's second.
 */
export function cursorEntry(
  after: string,
  known: readonly LedgerEntry[],
): Pick<LedgerEntry, 'createdAt' | 'entryId'> {
  const found = known.find((entry) => entry.entryId === after);
  if (found) return found;
  const second = Number(secondOfId(after));
  const end = Number.isFinite(second) ? second * 1000 + 999 : 0;
  return { entryId: after, createdAt: new Date(end).toISOString() };
}

/**
 * Ledger entry ids: a charge is its generation id, a top-up `topup#<reference>`, credit taken back
 * `correction#<reference>`.
 */
export const topUpEntryId = (reference: string) => `topup#${reference}`;
export const correctionEntryId = (reference: string) => `correction#${reference}`;
