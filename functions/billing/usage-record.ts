/**
 * A generation's usage record: its ledger entry and hold as plain JSON (bigints as decimal text). The
 * completions function logs it before its settlement write and keeps it on the generation's hold, the
 * sweeper completes a settlement from it, and `admin bill-logged` bills it from a log line. Read back
 * field by field: a log line or a stored item is outside input too.
 */
import * as z from 'zod';
import { type ChargeEntry, type Hold, MAX_SLICES } from '../core/store.js';

/** The record as logged and stored. */
export function usageRecordOf(entry: ChargeEntry, hold: Hold | undefined) {
  const { usageRecord: _kept, deferred: _deferred, ...held } = hold ?? ({} as Partial<Hold>);
  return {
    ...entry,
    billedNano: entry.billedNano.toString(),
    ...(hold ? { hold: { ...held, amountNano: hold.amountNano.toString() } } : {}),
  };
}

const Digits = z
  .string()
  .regex(/^\d{1,30}$/, 'a whole number of nano-USD')
  .transform(BigInt);
const Count = z.int().min(0).max(Number.MAX_SAFE_INTEGER);

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
  /** The balance slice it is billed on; absent in records written before slices, which were all on 0. */
  slice: z
    .int()
    .min(1)
    .max(MAX_SLICES - 1)
    .optional(),
  hold: z
    .object({
      accountId: z.string(),
      holdId: z.string(),
      amountNano: Digits,
      expiresAt: z.number(),
      createdAt: z.string(),
      slice: z
        .int()
        .min(1)
        .max(MAX_SLICES - 1)
        .optional(),
    })
    .optional(),
});

/** The entry and hold of a usage record; undefined when it is not one (a field missing or out of shape). */
export function readUsageRecord(record: unknown): { entry: ChargeEntry; hold: Hold | undefined } | undefined {
  const parsed = RecordSchema.safeParse(record);
  if (!parsed.success) return undefined;
  const { hold, usageAdjusted, user, finishReason, slice, ...required } = parsed.data;
  const entry: ChargeEntry = {
    ...required,
    ...(slice !== undefined ? { slice } : {}),
    ...(usageAdjusted !== undefined ? { usageAdjusted } : {}),
    ...(user !== undefined ? { user } : {}),
    ...(finishReason !== undefined ? { finishReason } : {}),
  };
  if (!hold) return { entry, hold: undefined };
  const { slice: holdSlice, ...heldFields } = hold;
  return { entry, hold: { ...heldFields, ...(holdSlice !== undefined ? { slice: holdSlice } : {}) } };
}
