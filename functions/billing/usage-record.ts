/**
 * A generation's usage record: its ledger entry and hold as plain JSON (bigints as decimal text). The
 * completions function logs it before its settlement write and keeps it on the generation's hold, the
 * sweeper completes a settlement from it, and `admin bill-logged` bills it from a log line. Read back
 * field by field: a log line or a stored item is outside input too.
 *
 * A logged record is signed (HMAC-SHA256 over its exact text, with a key only the completions function
 * and the readers that bill from the log hold: functions/adapters/secrets.ts), and what it bills is
 * held to what its generation could have cost (`usageRecordOutOfBounds`) before it is billed from a line.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import * as z from 'zod';
import { sliceOfGenerationId } from '../core/ids.js';
import { billedNanoFromUpstreamCost, InvalidAmountError, usdToCost } from '../core/money.js';
import { type ChargeEntry, type Hold, MAX_SLICES } from '../core/store.js';
import type { TierConfig } from '../core/tiers.js';
import { MAX_REQUEST_BYTES } from '../shared/too-large.js';
import { tableCost } from './pricing.js';
import { CAP_MARGIN, COST_FACTOR, COST_SLACK, promptBound } from './usage-bounds.js';

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
  /**
   * The balance slice it is billed on, as written (absent for slice 0, and in records written before
   * slices). Never trusted: the slice is the one its generation id names, and a record that states
   * another is refused.
   */
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

/**
 * The entry and hold of a usage record; undefined when it is not one (a field missing or out of
 * shape), when it states a slice other than the one its generation id names, or when its hold is not
 * its own generation's (another account, another id). The entry's slice is always its id's: the
 * ledger entry is looked up and written there (adapters/dynamodb/ledger.ts), so a record that
 * omitted or misstated it can never be billed a second time on another slice.
 */
export function readUsageRecord(record: unknown): { entry: ChargeEntry; hold: Hold | undefined } | undefined {
  const parsed = RecordSchema.safeParse(record);
  if (!parsed.success) return undefined;
  const { hold, usageAdjusted, user, finishReason, slice: stated, ...required } = parsed.data;
  // An id of another shape (none is made: functions/core/ids.ts) names no slice: the account item's.
  const slice = sliceOfGenerationId(required.generationId) ?? 0;
  if (stated !== undefined && stated !== slice) return undefined;
  const entry: ChargeEntry = {
    ...required,
    ...(slice !== 0 ? { slice } : {}),
    ...(usageAdjusted !== undefined ? { usageAdjusted } : {}),
    ...(user !== undefined ? { user } : {}),
    ...(finishReason !== undefined ? { finishReason } : {}),
  };
  if (!hold) return { entry, hold: undefined };
  const { slice: holdStated, ...heldFields } = hold;
  if (heldFields.accountId !== entry.accountId || heldFields.holdId !== entry.generationId) return undefined;
  if (holdStated !== undefined && holdStated !== slice) return undefined;
  return { entry, hold: { ...heldFields, ...(slice !== 0 ? { slice } : {}) } };
}

/**
 * The signature of a usage record: HMAC-SHA256 of its exact text (`JSON.stringify` of the record, as
 * it is logged and kept on the hold) under `key`, base64url. Logged beside the record as `signature`.
 */
export function signUsageRecord(recordText: string, key: string): string {
  return createHmac('sha256', key).update(recordText, 'utf8').digest('base64url');
}

/** Whether `signature` is the signature of `recordText` under one of `keys` (compared in constant time). */
export function usageRecordSigned(recordText: string, signature: string, keys: readonly string[]): boolean {
  const given = Buffer.from(signature, 'utf8');
  return keys.some((key) => {
    const expected = Buffer.from(signUsageRecord(recordText, key), 'utf8');
    return expected.length === given.length && timingSafeEqual(expected, given);
  });
}

/**
 * The most prompt tokens any request is billed for: the prompt bound (usage-bounds.ts) of the
 * largest body the service takes, every byte of it in the smallest content part that is given a media
 * allowance, `{"type":"file","file":{}},` (26 bytes), each as its own message. Far above any real
 * prompt: the bound a line's prompt tokens cannot pass, whatever its request was.
 */
let maxPromptTokens: number | undefined;
function mostPromptTokens(): number {
  if (maxPromptTokens === undefined) {
    const parts = Math.floor(MAX_REQUEST_BYTES / '{"type":"file","file":{}},'.length);
    const message = { content: [{ type: 'file' }] };
    maxPromptTokens = promptBound(
      MAX_REQUEST_BYTES,
      Array.from({ length: parts }, () => message),
    );
  }
  return maxPromptTokens;
}

/**
 * Why a record bills more than its generation could have cost, or undefined when it does not. Its
 * bill must be its upstream cost x 1.3 (money.ts); that cost no more than its own tokens at the
 * dearest price of any of its tier's targets (x COST_FACTOR + COST_SLACK where a target reports its
 * own cost, as usage-bounds.ts lets a reported cost be); its completion tokens no more than the
 * tier's largest output cap (a request's own cap is refused above the context length) + CAP_MARGIN,
 * its prompt tokens no more than any request's prompt bound; so no more than the tier's worst case
 * (holds.ts). A held generation's bill is also no more than its hold, which was that request's own
 * worst case. A genuine record always passes, unless the tier's prices were lowered since.
 */
export function usageRecordOutOfBounds(
  entry: ChargeEntry,
  hold: Hold | undefined,
  tiers: TierConfig,
): string | undefined {
  const tier = Object.hasOwn(tiers, entry.tier) ? tiers[entry.tier as keyof TierConfig] : undefined;
  if (!tier) return `tier ${JSON.stringify(entry.tier)} is not configured`;
  let cost: bigint;
  try {
    cost = usdToCost(entry.upstreamCostUsd);
  } catch (error) {
    if (error instanceof InvalidAmountError) return 'its upstream cost is not an amount';
    throw error;
  }
  if (entry.billedNano !== billedNanoFromUpstreamCost(cost))
    return `billed ${entry.billedNano} nano-USD is not its upstream cost ${entry.upstreamCostUsd} x 1.3`;
  const completionMax = Math.max(tier.contextLength, tier.maxOutputTokens) + CAP_MARGIN;
  if (entry.completionTokens > completionMax)
    return `completion tokens ${entry.completionTokens} > the tier's bound ${completionMax}`;
  if (entry.promptTokens > mostPromptTokens())
    return `prompt tokens ${entry.promptTokens} > any request's bound ${mostPromptTokens()}`;
  if (entry.cachedTokens > entry.promptTokens)
    return `cached tokens ${entry.cachedTokens} > prompt tokens ${entry.promptTokens}`;
  const tokens = {
    promptTokens: entry.promptTokens,
    completionTokens: entry.completionTokens,
    cachedTokens: 0,
  };
  let most = 0n;
  for (const { prices, reportsCost } of tier.targets) {
    const dearest = [prices.input, prices.cachedInput, prices.cacheWrite ?? 0n].reduce((a, b) =>
      a > b ? a : b,
    );
    const table = tableCost(tokens, { ...prices, input: dearest });
    const bound = reportsCost ? table * COST_FACTOR + COST_SLACK : table;
    if (bound > most) most = bound;
  }
  if (cost > most)
    return `upstream cost ${entry.upstreamCostUsd} > what its tokens cost at the tier's dearest target`;
  if (hold && entry.billedNano > hold.amountNano)
    return `billed ${entry.billedNano} nano-USD > its hold of ${hold.amountNano}`;
  return undefined;
}
