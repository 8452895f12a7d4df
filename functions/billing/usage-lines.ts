/**
 * Reads generations' usage records back from log lines: the completions function's `generation usage`
 * line (functions/billing/settle.ts) carries the ledger entry and hold under `record`, and the
 * record's signature under `signature`. One reader for the two that bill from the log: `admin
 * bill-logged` (lib/admin/usage-records.ts), given lines by an operator, and the logged-usage function
 * (functions/logged-usage/), given them by CloudWatch Logs. A line is outside input: each record is
 * read field by field (usage-record.ts), and billed only if it is signed with the usage-signing key
 * and bills no more than its generation could have cost (`refusalOf`). Anyone who can write to a log
 * group can write a line that looks like a usage record; only the completions function can sign one.
 */

import type { ChargeEntry, Hold } from '../core/store.js';
import { type TierConfig, tiersFromEnv } from '../core/tiers.js';
import { GENERATION_USAGE_MESSAGE } from './usage-line.js';
import { readUsageRecord, usageRecordOutOfBounds, usageRecordSigned } from './usage-record.js';

export interface LoggedGeneration {
  entry: ChargeEntry;
  hold: Hold | undefined;
  /** The record's text as logged (what its signature is over) and the line's signature, if any. */
  signed: { recordText: string; signature: string | undefined };
}

/** What one log message is: a usage record, a usage line that is not a readable one, or another line. */
export type UsageLine = { kind: 'record'; generation: LoggedGeneration } | { kind: 'unreadable' } | undefined;

/**
 * One log message: a line as Lambda writes it (the JSON line, with or without the plain text prefix of
 * timestamp and request id). A line that names the usage message but does not parse, or whose record
 * does not pass the checks, is unreadable; any other line is not a usage line (undefined). Whether a
 * readable record may be billed is `refusalOf`'s to say.
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
  const logged = line as { message?: unknown; record?: unknown; signature?: unknown } | null;
  if (logged?.message !== GENERATION_USAGE_MESSAGE) return undefined;
  const read = readUsageRecord(logged.record);
  if (!read) return { kind: 'unreadable' };
  // The text as the completions function logged it: JSON.stringify gives back the same text for the
  // record JSON.parse read (its keys in their order, its strings and integers as written).
  const signed = {
    recordText: JSON.stringify(logged.record),
    signature: typeof logged.signature === 'string' ? logged.signature : undefined,
  };
  return { kind: 'record', generation: { ...read, signed } };
}

/** What a reader that bills from the log checks a usage record against. */
export interface UsageLineChecks {
  /** The usage-signing keys (functions/adapters/secrets.ts usageVerifyingKeys): current, then previous. */
  keys: readonly string[];
  /** The tiers the completions function prices by: what a record may bill at most. */
  tiers: TierConfig;
  /**
   * Bill a record whose line has no signature at all (one logged before lines were signed), still
   * held to its bounds; a wrong signature is never billed. Only `admin bill-logged`, when asked.
   */
  acceptUnsigned?: boolean;
}

/** Why a line is refused: it has no signature, or one that no key gives for its record. */
export const UNSIGNED = 'unsigned';
export const WRONGLY_SIGNED = 'signature does not match';

/**
 * Why this logged generation must not be billed, or undefined when it may be: its line is unsigned,
 * signed with another key, or it bills more than its generation could have cost.
 */
export function refusalOf(generation: LoggedGeneration, checks: UsageLineChecks): string | undefined {
  const { recordText, signature } = generation.signed;
  if (signature === undefined) {
    if (!checks.acceptUnsigned) return UNSIGNED;
  } else if (!usageRecordSigned(recordText, signature, checks.keys)) return WRONGLY_SIGNED;
  const outOfBounds = usageRecordOutOfBounds(generation.entry, generation.hold, checks.tiers);
  return outOfBounds === undefined ? undefined : `out of bounds: ${outOfBounds}`;
}

/**
 * Whether a usage line among `messages` carries a signature that none of `keys` gives for its record:
 * a forgery, or a line signed with a key newer than the reader's copy of it (just rotated).
 */
export function signedWithAnotherKey(messages: Iterable<string>, keys: readonly string[]): boolean {
  for (const message of messages) {
    const read = readUsageLine(message);
    if (read?.kind !== 'record') continue;
    const { recordText, signature } = read.generation.signed;
    if (signature !== undefined && !usageRecordSigned(recordText, signature, keys)) return true;
  }
  return false;
}

/**
 * The tiers the completions function prices by, from the same environment it reads them from
 * (functions/completions/config.ts): TIERS_CONFIG, else every tier at one base URL priced as the
 * simulator is (UPSTREAM_BASE_URL, as `npm start` runs). Undefined when neither is set.
 */
export function usageTiersFromEnv(env: NodeJS.ProcessEnv = process.env): TierConfig | undefined {
  return tiersFromEnv(env);
}

/** A generation as charged: its id on its account (a line naming another account is another charge). */
const generationKey = (entry: ChargeEntry) => `${entry.accountId}\n${entry.generationId}`;

/** A usage record read from a line, with that line and why it may not be billed (undefined: it may). */
export type ReadRecord<L> = LoggedGeneration & { line: L; refused: string | undefined };

/**
 * The usage records among `lines`, in order, each generation once, and the usage lines that were
 * unreadable. A generation whose lines include a billable one is read from that one, so a refused
 * line (a forgery naming the same generation) never stands in for its genuine line.
 */
export function readUsageLines<L extends { message: string }>(
  lines: Iterable<L>,
  checks: UsageLineChecks,
): { records: ReadRecord<L>[]; unreadable: L[] } {
  const records = new Map<string, ReadRecord<L>>();
  const unreadable: L[] = [];
  for (const line of lines) {
    const read = readUsageLine(line.message);
    if (read?.kind === 'unreadable') unreadable.push(line);
    else if (read) {
      const refused = refusalOf(read.generation, checks);
      const key = generationKey(read.generation.entry);
      const seen = records.get(key);
      if (!seen || (seen.refused !== undefined && refused === undefined))
        records.set(key, { ...read.generation, line, refused });
    }
  }
  return { records: [...records.values()], unreadable };
}
