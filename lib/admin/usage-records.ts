/**
 * Bills generations from their logged usage records (`admin bill-logged`). Before its settlement
 * write, the completions function logs each generation's full record as one line, message
 * `generation usage` with the ledger entry and hold under `record` and the record's signature under
 * `signature` (functions/billing/settle.ts). A function that died between its reply and that write
 * leaves the record and no ledger entry; this finds such records and settles them, idempotently by
 * generation id: a record already settled (by the function or an earlier run) is counted as such and
 * changes nothing.
 *
 * Only a record signed with the usage-signing key is settled, and only if it bills no more than its
 * generation could have cost (functions/billing/usage-lines.ts), so a line anyone wrote into a log
 * charges nobody. The key is the secret the stack outputs as `UsageSigningSecretArn`, named by
 * USAGE_SIGNING_SECRET_ARN and read with the operator's own credentials (or given as USAGE_SIGNING_KEY,
 * as the local stack's is); the tiers are TIERS_CONFIG (the tier file the stack was deployed with),
 * else the simulator's prices, as `npm start` bills. Lines logged before lines were signed are
 * settled only when the operator asks (`acceptUnsigned`, BILL_LOGGED_ACCEPT_UNSIGNED=1), having
 * checked them: a wrongly signed line never is.
 *
 * The stack has CloudWatch Logs deliver each usage line to the logged-usage function, which does the
 * same without an operator (functions/logged-usage/); this stays for lines from before that
 * subscription, or from a log group without it.
 *
 * Input: the function's log lines (JSON per line, as Lambda writes them, with or without the plain
 * text prefix of timestamp and request id), or the JSON of a CloudWatch Logs Insights query's
 * results (`aws logs get-query-results`), whose `@message` fields hold those lines.
 */

import { usageVerifyingKeys } from '../../functions/adapters/secrets.js';
import {
  readUsageLines,
  UNSIGNED,
  type UsageLineChecks,
  usageTiersFromEnv,
  WRONGLY_SIGNED,
} from '../../functions/billing/usage-lines.js';
import { AccountNotFoundError, type Store } from '../../functions/core/store.js';
import { parseTierConfig, singleUpstreamConfig } from '../../functions/core/tiers.js';

/** The log messages in `text`: a Logs Insights result document's `@message` values, or its lines. */
function logMessages(text: string): string[] {
  const trimmed = text.trim();
  if (trimmed.startsWith('{') && trimmed.includes('"results"')) {
    try {
      const doc = JSON.parse(trimmed) as { results?: { field?: string; value?: string }[][] };
      if (Array.isArray(doc.results))
        return doc.results.map((row) => row.find((cell) => cell.field === '@message')?.value ?? '');
    } catch {
      // not one JSON document: read it line by line
    }
  }
  return text.split(/\r?\n/);
}

export interface BillLoggedResult {
  /** Settled now: their ledger entry did not exist. */
  settled: string[];
  /** Already on the ledger: nothing changed. */
  alreadySettled: string[];
  /** Lines that looked like usage records but did not pass the checks: unreadable, or `refused`. */
  invalid: number;
  /**
   * Records not settled, their generation not on the ledger: unsigned (unless accepted), wrongly
   * signed, or billing more than their generation could have cost; each with why. Counted in `invalid`.
   */
  refused: { generationId: string; accountId: string; reason: string }[];
  /** Records whose account (or the slice their generation id names) does not exist. */
  unbillable: string[];
}

export interface BillLoggedOptions {
  /** Where the key, the tiers and BILL_LOGGED_ACCEPT_UNSIGNED are read (default: the process's). */
  env?: NodeJS.ProcessEnv;
  /** Settle records from lines with no signature too (still held to their bounds). */
  acceptUnsigned?: boolean;
}

/** The operator's checks: the signing key and tiers from the environment, and whether unsigned lines are accepted. */
async function billLoggedChecks(options: BillLoggedOptions = {}): Promise<UsageLineChecks> {
  const env = options.env ?? process.env;
  const keys = await usageVerifyingKeys(env);
  const acceptUnsigned = options.acceptUnsigned ?? env.BILL_LOGGED_ACCEPT_UNSIGNED === '1';
  const tiers =
    usageTiersFromEnv(env) ?? parseTierConfig(singleUpstreamConfig('http://simulator.invalid/v1'));
  return { keys, tiers, acceptUnsigned };
}

/** Settles every logged generation that has no ledger entry; a second run settles nothing. */
export async function billLoggedGenerations(
  store: Pick<Store, 'settleCharge' | 'getLedgerEntry'>,
  text: string,
  options: BillLoggedOptions = {},
): Promise<BillLoggedResult> {
  const checks = await billLoggedChecks(options);
  // Read by the same reader as the logged-usage function's (functions/billing/usage-lines.ts).
  const { records, unreadable } = readUsageLines(
    logMessages(text).map((message) => ({ message })),
    checks,
  );
  const result: BillLoggedResult = {
    settled: [],
    alreadySettled: [],
    invalid: unreadable.length,
    refused: [],
    unbillable: [],
  };
  for (const { entry, hold, refused } of records) {
    // Looked up first: within DynamoDB's ten-minute idempotency window a repeated transaction with
    // the same token succeeds without applying anything, which would read as settled. Looked up on
    // the slice the generation id names (and slice 0), whatever the line says.
    if (await store.getLedgerEntry(entry.accountId, entry.generationId)) {
      result.alreadySettled.push(entry.generationId);
      continue;
    }
    if (refused !== undefined) {
      // A signature cannot be checked without the key: said, rather than a genuine line skipped.
      if (checks.keys.length === 0 && (refused === UNSIGNED || refused === WRONGLY_SIGNED))
        throw new Error(
          'bill-logged needs the usage-signing key to settle a record: set USAGE_SIGNING_SECRET_ARN to the stack output UsageSigningSecretArn (or USAGE_SIGNING_KEY)',
        );
      result.invalid += 1;
      result.refused.push({ generationId: entry.generationId, accountId: entry.accountId, reason: refused });
      continue;
    }
    try {
      // With its hold, if the sweeper has not released it yet (settleCharge settles without it if so).
      const outcome = await store.settleCharge(entry, hold ? { hold } : {});
      (outcome === 'settled' ? result.settled : result.alreadySettled).push(entry.generationId);
    } catch (error) {
      if (!(error instanceof AccountNotFoundError)) throw error;
      result.unbillable.push(entry.generationId);
    }
  }
  return result;
}
