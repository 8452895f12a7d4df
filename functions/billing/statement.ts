/**
 * A month's statement of an account, computed from its ledger entries alone (Store.listLedger), in
 * exact nano-USD: the balance at the start of the month (every entry before it), what the month
 * added and took (top-ups, refunds, other corrections, usage by key and by tier), and the balance at
 * its end (every entry before the next month). A month is a UTC calendar month: an entry made at
 * exactly 00:00:00.000 UTC on the 1st belongs to the month that starts then.
 *
 * The ledger has three kinds of entry (core/store-ledger.ts): a top-up adds (`topup#<reference>`),
 * a charge (one request's usage, its generation id) and a correction (`correction#<reference>`) take
 * away. A correction whose reference is a Stripe refund's (`stripe:refund:<id>`, payments/events.ts)
 * is a refund here; every other correction (a dispute, credit taken back by hand) is a correction.
 *
 * The closing balance is summed from the entries on its own, and the statement is checked against
 * it: closing = opening + top-ups - refunds - corrections - usage, to the nano-dollar; and usage by
 * key and usage by tier each add up to usage. A statement that does not is an error, never shown.
 */
import type { LedgerEntry } from '../core/store-ledger.js';

/** A refund's correction reference (payments/events.ts writes `stripe:refund:<refund id>`). */
const REFUND_REFERENCE = 'stripe:refund:';

/** Where usage without a key (or without a tier) is counted: no real key id or tier is empty. */
export const NO_KEY = '';

/** One top-up, refund or correction of the month, as the statement lists it. */
export interface StatementLine {
  createdAt: string;
  entryId: string;
  kind: 'topup' | 'refund' | 'correction';
  reference: string;
  /** Positive: what it added (a top-up) or took (a refund, a correction). */
  amountNano: bigint;
}

interface UsageRow {
  /** A key id or a tier name (NO_KEY when the charges named none). */
  name: string;
  requests: number;
  amountNano: bigint;
}

export interface Statement {
  /** `YYYY-MM`. */
  month: string;
  /** The month's first instant and the next month's (ISO, UTC): entries in [from, to). */
  from: string;
  to: string;
  openingNano: bigint;
  topUpsNano: bigint;
  refundsNano: bigint;
  correctionsNano: bigint;
  usageNano: bigint;
  closingNano: bigint;
  /** Requests charged in the month. */
  requests: number;
  /** Top-ups, refunds and corrections in the month, oldest first. */
  lines: StatementLine[];
  /** Usage by key and by tier, each largest first (then by name). */
  byKey: UsageRow[];
  byTier: UsageRow[];
}

export class InvalidMonthError extends Error {
  constructor(month: string) {
    super(`not a month (YYYY-MM, from 2000-01): ${JSON.stringify(month.slice(0, 20))}`);
    this.name = 'InvalidMonthError';
  }
}

/** The statement does not add up: a bug or a ledger that changed while it was read, never shown. */
export class StatementMismatchError extends Error {
  constructor(what: string) {
    super(`statement does not add up: ${what}`);
    this.name = 'StatementMismatchError';
  }
}

const MONTH = /^(\d{4})-(0[1-9]|1[0-2])$/;

/** The month's bounds as ISO times: [from, to). Throws InvalidMonthError. */
export function monthBounds(month: string): { from: string; to: string } {
  const match = MONTH.exec(month);
  if (!match || Number(match[1]) < 2000) throw new InvalidMonthError(month);
  const year = Number(match[1]);
  const index = Number(match[2]) - 1;
  return {
    from: new Date(Date.UTC(year, index, 1)).toISOString(),
    to: new Date(Date.UTC(year, index + 1, 1)).toISOString(),
  };
}

/** The month (`YYYY-MM`) an ISO time falls in, UTC. */
export const monthOf = (iso: string): string => new Date(Date.parse(iso)).toISOString().slice(0, 7);

/** The month before or after `month` (`delta` months away). */
export function addMonths(month: string, delta: number): string {
  const { from } = monthBounds(month);
  const at = new Date(from);
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + delta, 1)).toISOString().slice(0, 7);
}

/** The instant of an entry, in ms; one whose time does not parse counts from the epoch (never lost). */
const instant = (entry: LedgerEntry) => {
  const at = Date.parse(entry.createdAt);
  return Number.isNaN(at) ? 0 : at;
};

const kindOf = (entry: LedgerEntry): StatementLine['kind'] | 'usage' =>
  entry.type === 'charge'
    ? 'usage'
    : entry.type === 'topup'
      ? 'topup'
      : (entry.reference ?? '').startsWith(REFUND_REFERENCE)
        ? 'refund'
        : 'correction';

function addUsage(rows: Map<string, UsageRow>, name: string, amount: bigint): void {
  const row = rows.get(name) ?? { name, requests: 0, amountNano: 0n };
  row.requests += 1;
  row.amountNano += amount;
  rows.set(name, row);
}

const largestFirst = (rows: Map<string, UsageRow>): UsageRow[] =>
  [...rows.values()].sort((a, b) =>
    a.amountNano === b.amountNano ? (a.name < b.name ? -1 : 1) : a.amountNano > b.amountNano ? -1 : 1,
  );

const sum = (values: Iterable<bigint>) => {
  let total = 0n;
  for (const value of values) total += value;
  return total;
};

/** The month's statement from every ledger entry of the account (any order). Throws InvalidMonthError. */
export function monthlyStatement(entries: readonly LedgerEntry[], month: string): Statement {
  const { from, to } = monthBounds(month);
  const start = Date.parse(from);
  const end = Date.parse(to);
  let opening = 0n;
  let closing = 0n;
  const totals = { topup: 0n, refund: 0n, correction: 0n, usage: 0n };
  const lines: StatementLine[] = [];
  const byKey = new Map<string, UsageRow>();
  const byTier = new Map<string, UsageRow>();
  let requests = 0;
  for (const entry of entries) {
    const at = instant(entry);
    if (at >= end) continue;
    closing += entry.deltaNano;
    if (at < start) {
      opening += entry.deltaNano;
      continue;
    }
    const kind = kindOf(entry);
    // What it took is the negative of its change; a top-up's change is what it added.
    const amount = kind === 'topup' ? entry.deltaNano : -entry.deltaNano;
    totals[kind] += amount;
    if (kind === 'usage') {
      requests += 1;
      addUsage(byKey, entry.keyId ?? NO_KEY, amount);
      addUsage(byTier, entry.tier ?? NO_KEY, amount);
    } else {
      lines.push({
        createdAt: entry.createdAt,
        entryId: entry.entryId,
        kind,
        reference: entry.reference ?? entry.entryId,
        amountNano: amount,
      });
    }
  }
  lines.sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt) || (a.entryId < b.entryId ? -1 : 1));
  const statement: Statement = {
    month,
    from,
    to,
    openingNano: opening,
    topUpsNano: totals.topup,
    refundsNano: totals.refund,
    correctionsNano: totals.correction,
    usageNano: totals.usage,
    closingNano: closing,
    requests,
    lines,
    byKey: largestFirst(byKey),
    byTier: largestFirst(byTier),
  };
  checkStatement(statement);
  return statement;
}

/**
 * Throws StatementMismatchError unless closing = opening + top-ups - refunds - corrections - usage,
 * and usage by key and by tier, and the listed lines, each add up to their totals.
 */
export function checkStatement(s: Statement): void {
  const expected = s.openingNano + s.topUpsNano - s.refundsNano - s.correctionsNano - s.usageNano;
  if (expected !== s.closingNano)
    throw new StatementMismatchError(`closing ${s.closingNano} != ${expected} (${s.month})`);
  if (sum(s.byKey.map((row) => row.amountNano)) !== s.usageNano)
    throw new StatementMismatchError(`usage by key != usage (${s.month})`);
  if (sum(s.byTier.map((row) => row.amountNano)) !== s.usageNano)
    throw new StatementMismatchError(`usage by tier != usage (${s.month})`);
  for (const kind of ['topup', 'refund', 'correction'] as const) {
    const listed = sum(s.lines.filter((line) => line.kind === kind).map((line) => line.amountNano));
    const total = kind === 'topup' ? s.topUpsNano : kind === 'refund' ? s.refundsNano : s.correctionsNano;
    if (listed !== total) throw new StatementMismatchError(`${kind} lines != ${kind} total (${s.month})`);
  }
}
