/**
 * Bills generations from their logged usage records (`admin bill-logged`). Before its settlement
 * write, the completions function logs each generation's full record as one line, message
 * `generation usage` with the ledger entry and hold under `record` (functions/billing/settle.ts).
 * A function that died between its reply and that write leaves the record and no ledger entry; this
 * finds such records and settles them, idempotently by generation id: a record already settled
 * (by the function or an earlier run) is counted as such and changes nothing.
 *
 * The stack has CloudWatch Logs deliver each usage line to the logged-usage function, which does the
 * same without an operator (functions/logged-usage/); this stays for lines from before that
 * subscription, or from a log group without it.
 *
 * Input: the function's log lines (JSON per line, as Lambda writes them, with or without the plain
 * text prefix of timestamp and request id), or the JSON of a CloudWatch Logs Insights query's
 * results (`aws logs get-query-results`), whose `@message` fields hold those lines.
 */

import { readUsageLines } from '../../functions/billing/usage-lines.js';
import type { Store } from '../../functions/core/store.js';

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
  /** Lines that looked like usage records but did not pass the checks. */
  invalid: number;
}

/** Settles every logged generation that has no ledger entry; a second run settles nothing. */
export async function billLoggedGenerations(
  store: Pick<Store, 'settleCharge' | 'getLedgerEntry'>,
  text: string,
): Promise<BillLoggedResult> {
  // Read by the same reader as the logged-usage function's (functions/billing/usage-lines.ts).
  const { records, invalid } = readUsageLines(logMessages(text));
  const result: BillLoggedResult = { settled: [], alreadySettled: [], invalid };
  for (const { entry, hold } of records) {
    // Looked up first: within DynamoDB's ten-minute idempotency window a repeated transaction with
    // the same token succeeds without applying anything, which would read as settled.
    if (await store.getLedgerEntry(entry.accountId, entry.generationId)) {
      result.alreadySettled.push(entry.generationId);
      continue;
    }
    // With its hold, if the sweeper has not released it yet (settleCharge settles without it if so).
    const outcome = await store.settleCharge(entry, hold ? { hold } : {});
    (outcome === 'settled' ? result.settled : result.alreadySettled).push(entry.generationId);
  }
  return result;
}
