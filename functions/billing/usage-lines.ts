/**
 * Reads generations' usage records back from log lines: the completions function's `generation usage`
 * line (functions/billing/settle.ts) carries the ledger entry and hold under `record`. One reader for
 * the two that bill from the log: `admin bill-logged` (lib/admin/usage-records.ts), given lines by an
 * operator, and the logged-usage function (functions/logged-usage/), given them by CloudWatch Logs.
 * A line is outside input: each record is read field by field (usage-record.ts).
 */
import type { ChargeEntry, Hold } from '../core/store.js';
import { GENERATION_USAGE_MESSAGE } from './usage-line.js';
import { readUsageRecord } from './usage-record.js';

export interface LoggedGeneration {
  entry: ChargeEntry;
  hold: Hold | undefined;
}

/** What one log message is: a usage record, a usage line that is not a readable one, or another line. */
export type UsageLine = { kind: 'record'; generation: LoggedGeneration } | { kind: 'unreadable' } | undefined;

/**
 * One log message: a line as Lambda writes it (the JSON line, with or without the plain text prefix of
 * timestamp and request id). A line that names the usage message but does not parse, or whose record
 * does not pass the checks, is unreadable; any other line is not a usage line (undefined).
 */
export function readUsageLine(message: string): UsageLine {
  const start = message.indexOf('{');
  if (start < 0) return undefined;
  let line: unknown;
  try {
    line = JSON.parse(message.slice(start));
  } catch {
    // Cut short or garbled: unreadable if it was a usage line, else not one of ours.
    return message.includes(`"${GENERATION_USAGE_MESSAGE}"`) ? { kind: 'unreadable' } : undefined;
  }
  const logged = line as { message?: unknown; record?: unknown } | null;
  if (logged?.message !== GENERATION_USAGE_MESSAGE) return undefined;
  const generation = readUsageRecord(logged.record);
  return generation ? { kind: 'record', generation } : { kind: 'unreadable' };
}

/** The usage records among `messages`, in order, each generation once, and how many were unreadable. */
export function readUsageLines(messages: Iterable<string>): { records: LoggedGeneration[]; invalid: number } {
  const records = new Map<string, LoggedGeneration>();
  let invalid = 0;
  for (const message of messages) {
    const read = readUsageLine(message);
    if (read?.kind === 'unreadable') invalid += 1;
    else if (read) records.set(read.generation.entry.generationId, read.generation);
  }
  return { records: [...records.values()], invalid };
}
