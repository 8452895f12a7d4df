/**
 * Bills generations from their logged usage records (`admin bill-logged`). Before its settlement
 * write, the completions function logs each generation's full record as one line, message
 * `generation usage` with the ledger entry and hold under `record` (functions/completions/billing.ts).
 * A function that died between its reply and that write leaves the record and no ledger entry; this
 * finds such records and settles them, idempotently by generation id: a record already settled
 * (by the function or an earlier run) is counted as such and changes nothing.
 *
 * Input: the function's log lines (JSON per line, as Lambda writes them, with or without the plain
 * text prefix of timestamp and request id), or the JSON of a CloudWatch Logs Insights query's
 * results (`aws logs get-query-results`), whose `@message` fields hold those lines.
 */
import * as z from 'zod';
import type { ChargeEntry, Hold, Store } from '../../functions/core/store.js';
import { GENERATION_USAGE_MESSAGE } from '../../functions/shared/usage-line.js';

const Digits = z
  .string()
  .regex(/^\d{1,30}$/, 'a whole number of nano-USD')
  .transform(BigInt);
const Count = z.int().min(0).max(Number.MAX_SAFE_INTEGER);

/** One logged usage record, checked field by field (a log line is outside input too). */
const RecordSchema = z.object({
  accountId: z.string().min(1).max(256),
  generationId: z.string().regex(/^gen-\d+-[A-Za-z0-9]+$/),
  keyId: z.string().min(1).max(256),
  tier: z.string().min(1).max(64),
  upstreamModel: z.string().max(512),
  promptTokens: Count,
  completionTokens: Count,
  cachedTokens: Count,
  upstreamCostUsd: z.string().regex(/^\d{1,30}(\.\d{1,30})?$/),
  billedNano: Digits,
  estimated: z.boolean(),
  usageAdjusted: z.string().max(1_000).optional(),
  user: z.string().max(256).optional(),
  finishReason: z.string().max(32).optional(),
  createdAt: z.string().max(64),
  hold: z
    .object({
      accountId: z.string(),
      holdId: z.string(),
      amountNano: Digits,
      expiresAt: z.number(),
      createdAt: z.string(),
    })
    .optional(),
});

interface LoggedGeneration {
  entry: ChargeEntry;
  hold: Hold | undefined;
}

/** The usage records in `text`, in order, each generation once; lines that are not records are skipped. */
function readUsageRecords(text: string): { records: LoggedGeneration[]; invalid: number } {
  const records = new Map<string, LoggedGeneration>();
  let invalid = 0;
  for (const message of logMessages(text)) {
    const start = message.indexOf('{');
    if (start < 0) continue;
    let line: unknown;
    try {
      line = JSON.parse(message.slice(start));
    } catch {
      continue;
    }
    const logged = line as { message?: unknown; record?: unknown };
    if (logged.message !== GENERATION_USAGE_MESSAGE) continue;
    const parsed = RecordSchema.safeParse(logged.record);
    if (!parsed.success) {
      invalid += 1;
      continue;
    }
    const { hold, usageAdjusted, user, finishReason, ...required } = parsed.data;
    const entry: ChargeEntry = {
      ...required,
      ...(usageAdjusted !== undefined ? { usageAdjusted } : {}),
      ...(user !== undefined ? { user } : {}),
      ...(finishReason !== undefined ? { finishReason } : {}),
    };
    records.set(entry.generationId, { entry, hold });
  }
  return { records: [...records.values()], invalid };
}

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
  const { records, invalid } = readUsageRecords(text);
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
