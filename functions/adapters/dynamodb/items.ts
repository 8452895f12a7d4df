/**
 * Table names and the item format: the one place that knows how a key, an account, a ledger entry
 * and a hold are stored. Money attributes are integer nano-USD numbers, read and written as their
 * decimal text, never as a JS float.
 *
 * Formats (decided once, read leniently for items written by earlier versions):
 * - account: `creditBalance` (N), `heldNano` (N, absent = 0), `status` (absent = active, the status
 *   of every account before statuses existed); a key whose account item is gone cannot spend: banned.
 *   `slices` (N, absent = 1): how many slices its balance is split into; the account item is slice 0.
 * - slice i > 0: an item of the accounts table keyed `<accountId>#<i>` (account ids have no `#`),
 *   with its own `creditBalance` and `heldNano`, a copy of the account's `status`, and `sliceOf`.
 *   The slice's charges and holds have the same partition key, `<accountId>#<i>`, in the ledger and
 *   holds tables (slice 0's: the account id, as every entry before slices): one busy account's
 *   writes spread over as many partitions as it has slices. Top-ups are entries of slice 0.
 * - per-key usage, on the account and slice items: `usage_<keyId>` (N, absent = 0), what the key's
 *   charges deducted from that slice, added by the settlement's own update (ledger.ts). A key's usage
 *   is the sum over the slices. Its cost: each key that spends adds about 20 bytes plus the name's
 *   26 to every slice item it spends on, and a transactional write costs 2 write units per KB of the
 *   item, so an account whose slice items pass 1 KB (some 20 keys spending on one slice) pays one
 *   more unit per KB on each settlement. Counted from the version that added it on: older charges
 *   are in the ledger (`admin usage --by key`).
 * - daily spend (Activity; adapters/dynamodb/activity.ts): `d_<YYYYMMDD>_<tier>` (N) on a slice item,
 *   what that slice's charges of that UTC day (utcDay of the entry's createdAt) and tier deducted,
 *   added by the settlement's own update; `rolls` (N) counts the roll-ups that moved such counters,
 *   once their day is over, into the account's day item `<accountId>#day#<YYYY-MM-DD>` of the
 *   accounts table (`s_<tier>` N per tier, summed over slices). A counter is removed only in the
 *   transaction that adds its value to the day item, conditioned on the value read: moved once.
 * - a key's day counter (its daily spend cap; core/store.ts "KEY DAILY CAPS"): `kc_<YYYYMMDD>_<keyId>`
 *   (N) on a slice item, what the key committed on that slice that UTC day: its charges (every
 *   settlement of every key ADDs its billed amount, in the update it makes anyway) plus a capped
 *   key's live holds (ADDed when placed, taken off by their settlement or release). About 45 bytes a
 *   key that spends on the slice in a day; the sweeper's roll-up (activity.ts) removes past days'.
 *   The cap itself is `dailyCapNano` (N) on the key item, absent without one.
 * - ledger: `type` charge|topup and `amountNanoUsd` (N, positive; the type gives the sign). Charges
 *   written before this format carry `billedNanoUsd` instead, and are read as such.
 * - hold: `amountNano` (N), `expiresAt` (N, epoch ms), `createdAt`; `keyId` (S) on a capped key's
 *   hold, whose amount is on that key's counter of createdAt's day; `usageRecord` (S, JSON) and
 *   `deferred` (BOOL) once its generation's settlement is left to the sweeper.
 * - transfer (credit on its way between two slices, core/store.ts Transfer): an item of the holds
 *   table in the source slice's partition, `holdId` `transfer#<to>#<random>`, with `transferTo` (N),
 *   `amountNano`, `expiresAt` (when it is due) and `createdAt`; its amount is in the source slice's
 *   `outgoingNano` and the destination's `incomingNano` (N, absent = 0) until it moves. It is not a
 *   hold: not in `heldNano`, not listed with the holds.
 */
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import type { AccountStatus, KeyStatus, Principal } from '../../core/access.js';
import type { AccountRecord, ChargeEntry, Hold, KeyRecord, LedgerEntry, Transfer } from '../../core/store.js';
import { LOCAL_TABLE_NAMES, TABLE_ENV } from './schema.js';

export interface TableNames {
  keys: string;
  accounts: string;
  ledger: string;
  holds: string;
  /** The team's and the audit log's, when known; else found by their environment (side-tables.ts). */
  team?: string;
  audit?: string;
}

/**
 * The table names from the environment. In Lambda every one must be set (a missing one fails the
 * cold start, naming it); elsewhere the local stack's names are the default.
 */
export function tableNamesFromEnv(env: NodeJS.ProcessEnv = process.env): TableNames {
  const inLambda = Boolean(env.AWS_LAMBDA_FUNCTION_NAME);
  const name = (id: keyof typeof TABLE_ENV) => {
    const value = env[TABLE_ENV[id]];
    if (value) return value;
    if (inLambda) throw new Error(`${TABLE_ENV[id]} is not set: the function cannot find its ${id} table`);
    return LOCAL_TABLE_NAMES[id];
  };
  return { keys: name('keys'), accounts: name('accounts'), ledger: name('ledger'), holds: name('holds') };
}

export type Item = Record<string, AttributeValue>;
export const S = (value: string): AttributeValue => ({ S: value });
export const N = (value: bigint | number): AttributeValue => ({ N: value.toString() });
const big = (value: AttributeValue | undefined) => BigInt(value?.N ?? '0');
const num = (value: AttributeValue | undefined) => (value?.N === undefined ? undefined : Number(value.N));

function accountStatusOf(item: Item): AccountStatus {
  return (item.status?.S as AccountStatus | undefined) ?? 'active';
}

/** The item of slice `slice` of an account's balance: slice 0 is the account item itself. */
export const sliceKey = (accountId: string, slice = 0): string =>
  slice === 0 ? accountId : `${accountId}#${slice}`;

/** The account an accounts-table item belongs to (itself, or the account a slice item is part of). */
export const accountOfItem = (item: Item): string => (item.accountId?.S ?? '').split('#')[0] ?? '';

/** The slice a partition key of the accounts, ledger or holds table names (`<accountId>#<i>`: i). */
const sliceOfKey = (key: string): number => {
  const at = key.indexOf('#');
  return at < 0 ? 0 : Number(key.slice(at + 1));
};

/** Key ids as generate makes them (`key_` and 16 hex digits); base62 allowed, bounded. */
const KEY_ID = /^key_[0-9A-Za-z]{1,64}$/;

/**
 * The attribute on a slice item that keeps what the key has spent from that slice, or undefined for
 * a key id that is not one (nothing is counted for it: a settlement never fails for its counter).
 */
export const keyUsageAttribute = (keyId: string): string | undefined =>
  KEY_ID.test(keyId) ? `usage_${keyId}` : undefined;

/**
 * The attribute on a slice item of the key's day counter for UTC day `day` (`YYYY-MM-DD`):
 * `kc_20261128_key_0123456789abcdef`; undefined for a key id that is not one (nothing is counted).
 */
export const keyDayAttribute = (day: string, keyId: string): string | undefined =>
  KEY_ID.test(keyId) ? `kc_${day.replaceAll('-', '')}_${keyId}` : undefined;

/** The key day counters on a slice item (any key's): attribute, day (`YYYY-MM-DD`) and amount. */
export function keyDayCounters(item: Item): { attribute: string; day: string; nano: bigint }[] {
  const found = [];
  for (const [attribute, value] of Object.entries(item)) {
    if (!attribute.startsWith('kc_') || value.N === undefined) continue;
    const match = /^kc_(\d{4})(\d{2})(\d{2})_key_/.exec(attribute);
    if (match) found.push({ attribute, day: `${match[1]}-${match[2]}-${match[3]}`, nano: BigInt(value.N) });
  }
  return found;
}

/** One key's day counters on a slice item, by day (`YYYY-MM-DD`): what a capped key's principal carries. */
function keySpendByDay(item: Item | undefined, keyId: string): Record<string, bigint> {
  const spent: Record<string, bigint> = {};
  if (!item) return spent;
  const suffix = `_${keyId}`;
  for (const [attribute, value] of Object.entries(item)) {
    // kc_ + 8 digits + _ + the key id, exactly.
    if (!attribute.startsWith('kc_') || attribute.length !== 11 + suffix.length) continue;
    if (!attribute.endsWith(suffix) || value.N === undefined) continue;
    const day = attribute.slice(3, 11);
    spent[`${day.slice(0, 4)}-${day.slice(4, 6)}-${day.slice(6, 8)}`] = BigInt(value.N);
  }
  return spent;
}

/** Tier ids as counter names carry them; any other tier is counted as `other` (never refused). */
const TIER_NAME = /^[0-9A-Za-z._-]{1,40}$/;
const counterTier = (tier: string): string => (TIER_NAME.test(tier) ? tier : 'other');

/** The counter on a slice item of one UTC day's (`YYYY-MM-DD`) charges of one tier: `d_20261128_svc-fast`. */
export const dayCounterAttribute = (day: string, tier: string): string =>
  `d_${day.replaceAll('-', '')}_${counterTier(tier)}`;

/** The day counters on a slice item: attribute, day (`YYYY-MM-DD`), tier and amount. */
export function dayCounters(item: Item): { attribute: string; day: string; tier: string; nano: bigint }[] {
  const found = [];
  for (const [attribute, value] of Object.entries(item)) {
    const match = /^d_(\d{4})(\d{2})(\d{2})_(.+)$/.exec(attribute);
    if (!match || value.N === undefined) continue;
    const day = `${match[1]}-${match[2]}-${match[3]}`;
    found.push({ attribute, day, tier: match[4] ?? 'other', nano: BigInt(value.N) });
  }
  return found;
}

/** The key of an account's day item (its spend of one UTC day, rolled up from its slices' counters). */
export const dayItemKey = (accountId: string, day: string): string => `${accountId}#day#${day}`;

/** How many slices an account item says its balance has. */
export const slicesOf = (item: Item | undefined): number => Math.max(1, num(item?.slices) ?? 1);

export function toAccount(item: Item): AccountRecord {
  return {
    accountId: item.accountId?.S ?? '',
    status: accountStatusOf(item),
    balanceNano: big(item.creditBalance),
    heldNano: big(item.heldNano),
    ...(item.outgoingNano?.N && item.outgoingNano.N !== '0' ? { outgoingNano: big(item.outgoingNano) } : {}),
    ...(item.createdAt?.S ? { createdAt: item.createdAt.S } : {}),
    slices: slicesOf(item),
  };
}

/**
 * The principal of one read of a key item and one slice item. A capped key's (`dailyCapNano` on its
 * item) carries its cap, the account's slice count (`slices`, as the reader knows it) and its day
 * counters on the slice; a key without a cap costs nothing more than before.
 */
export function toPrincipal(
  keyItem: Item,
  accountItem: Item | undefined,
  slice = 0,
  slices = 1,
): Principal | undefined {
  const accountId = keyItem.accountId?.S;
  if (!accountId) return undefined;
  const keyId = keyItem.keyId?.S ?? '';
  const cap = keyItem.dailyCapNano?.N;
  return {
    keyId,
    accountId,
    keyStatus: (keyItem.status?.S as KeyStatus | undefined) ?? 'revoked',
    accountStatus: accountItem ? accountStatusOf(accountItem) : 'banned',
    balanceNano: big(accountItem?.creditBalance),
    heldNano: big(accountItem?.heldNano),
    ...(accountItem?.outgoingNano?.N && accountItem.outgoingNano.N !== '0'
      ? { outgoingNano: big(accountItem.outgoingNano) }
      : {}),
    ...(slice !== 0 ? { slice } : {}),
    ...(cap !== undefined
      ? { keyCap: { capNano: BigInt(cap), slices, spentByDay: keySpendByDay(accountItem, keyId) } }
      : {}),
  };
}

export function keyItem(key: KeyRecord): Item {
  return {
    keyHash: S(key.keyHash),
    keyId: S(key.keyId),
    accountId: S(key.accountId),
    name: S(key.name),
    displayPrefix: S(key.displayPrefix),
    status: S(key.status),
    createdAt: S(key.createdAt),
    ...(key.revokedAt ? { revokedAt: S(key.revokedAt) } : {}),
    ...(key.dailyCapNano !== undefined ? { dailyCapNano: N(key.dailyCapNano) } : {}),
    // Who made it (a member): `createdBy` {subject, email?}, a map.
    ...(key.createdBy
      ? {
          createdBy: {
            M: {
              subject: S(key.createdBy.subject),
              ...(key.createdBy.email ? { email: S(key.createdBy.email) } : {}),
            },
          },
        }
      : {}),
  };
}

export function toKey(item: Item): KeyRecord {
  return {
    keyHash: item.keyHash?.S ?? '',
    keyId: item.keyId?.S ?? '',
    accountId: item.accountId?.S ?? '',
    name: item.name?.S ?? '',
    displayPrefix: item.displayPrefix?.S ?? '',
    status: (item.status?.S as KeyStatus | undefined) ?? 'revoked',
    createdAt: item.createdAt?.S ?? '',
    ...(item.revokedAt?.S ? { revokedAt: item.revokedAt.S } : {}),
    ...(item.dailyCapNano?.N !== undefined ? { dailyCapNano: BigInt(item.dailyCapNano.N) } : {}),
    ...(item.createdBy?.M?.subject?.S !== undefined
      ? {
          createdBy: {
            subject: item.createdBy.M.subject.S,
            ...(item.createdBy.M.email?.S !== undefined ? { email: item.createdBy.M.email.S } : {}),
          },
        }
      : {}),
  };
}

export function chargeItem(entry: ChargeEntry): Item {
  return {
    accountId: S(sliceKey(entry.accountId, entry.slice)),
    entryId: S(entry.generationId),
    type: S('charge'),
    keyId: S(entry.keyId),
    tier: S(entry.tier),
    upstreamModel: S(entry.upstreamModel),
    promptTokens: N(entry.promptTokens),
    completionTokens: N(entry.completionTokens),
    cachedTokens: N(entry.cachedTokens),
    upstreamCostUsd: S(entry.upstreamCostUsd),
    amountNanoUsd: N(entry.billedNano),
    estimated: { BOOL: entry.estimated },
    ...(entry.usageAdjusted ? { usageAdjusted: S(entry.usageAdjusted) } : {}),
    ...(entry.user ? { user: S(entry.user) } : {}),
    ...(entry.finishReason ? { finishReason: S(entry.finishReason) } : {}),
    createdAt: S(entry.createdAt),
  };
}

export function topUpItem(
  accountId: string,
  entryId: string,
  reference: string,
  amountNano: bigint,
  now: string,
): Item {
  return {
    accountId: S(accountId),
    entryId: S(entryId),
    type: S('topup'),
    reference: S(reference),
    amountNanoUsd: N(amountNano),
    createdAt: S(now),
  };
}

export function toLedgerEntry(item: Item): LedgerEntry {
  const amount = BigInt(item.amountNanoUsd?.N ?? item.billedNanoUsd?.N ?? '0');
  if (item.type?.S === 'topup') {
    return {
      entryId: item.entryId?.S ?? '',
      type: 'topup',
      createdAt: item.createdAt?.S ?? '',
      deltaNano: amount,
      ...(item.reference?.S ? { reference: item.reference.S } : {}),
    };
  }
  // An operator's correction (corrections.ts): credit taken back, under its reference.
  if (item.type?.S === 'correction') {
    return {
      entryId: item.entryId?.S ?? '',
      type: 'correction',
      createdAt: item.createdAt?.S ?? '',
      deltaNano: -amount,
      reference: item.reference?.S ?? '',
    };
  }
  const entry: LedgerEntry = {
    entryId: item.entryId?.S ?? '',
    type: 'charge',
    createdAt: item.createdAt?.S ?? '',
    deltaNano: -amount,
    estimated: item.estimated?.BOOL ?? false,
  };
  if (item.tier?.S) entry.tier = item.tier.S;
  if (item.keyId?.S) entry.keyId = item.keyId.S;
  if (item.user?.S) entry.user = item.user.S;
  if (item.usageAdjusted?.S) entry.usageAdjusted = item.usageAdjusted.S;
  if (item.finishReason?.S) entry.finishReason = item.finishReason.S;
  const prompt = num(item.promptTokens);
  const completion = num(item.completionTokens);
  const cached = num(item.cachedTokens);
  if (prompt !== undefined) entry.promptTokens = prompt;
  if (completion !== undefined) entry.completionTokens = completion;
  if (cached !== undefined) entry.cachedTokens = cached;
  return entry;
}

/** A hold's key: in its slice's partition. */
export const holdKey = (hold: { accountId: string; holdId: string; slice?: number | undefined }): Item => ({
  accountId: S(sliceKey(hold.accountId, hold.slice)),
  holdId: S(hold.holdId),
});

export function holdItem(hold: Hold): Item {
  return {
    ...holdKey(hold),
    amountNano: N(hold.amountNano),
    expiresAt: N(hold.expiresAt),
    createdAt: S(hold.createdAt),
    ...(hold.keyId ? { keyId: S(hold.keyId) } : {}),
  };
}

export function toHold(item: Item): Hold {
  const key = item.accountId?.S ?? '';
  const slice = sliceOfKey(key);
  return {
    accountId: accountOfItem(item),
    holdId: item.holdId?.S ?? '',
    amountNano: big(item.amountNano),
    expiresAt: num(item.expiresAt) ?? 0,
    createdAt: item.createdAt?.S ?? '',
    ...(item.keyId?.S ? { keyId: item.keyId.S } : {}),
    ...(item.usageRecord?.S !== undefined ? { usageRecord: item.usageRecord.S } : {}),
    ...(item.deferred?.BOOL === true ? { deferred: true } : {}),
    ...(slice !== 0 ? { slice } : {}),
  };
}

/** The prefix of a transfer's `holdId` in the holds table: what tells it from a hold. */
export const TRANSFER_PREFIX = 'transfer#';

export const isTransferItem = (item: Item): boolean => (item.holdId?.S ?? '').startsWith(TRANSFER_PREFIX);

export function transferItem(transfer: Transfer): Item {
  return {
    accountId: S(sliceKey(transfer.accountId, transfer.from)),
    holdId: S(transfer.transferId),
    transferTo: N(transfer.to),
    amountNano: N(transfer.amountNano),
    expiresAt: N(transfer.dueAt),
    createdAt: S(transfer.createdAt),
  };
}

export function toTransfer(item: Item): Transfer {
  return {
    accountId: accountOfItem(item),
    transferId: item.holdId?.S ?? '',
    from: sliceOfKey(item.accountId?.S ?? ''),
    to: num(item.transferTo) ?? 0,
    amountNano: big(item.amountNano),
    dueAt: num(item.expiresAt) ?? 0,
    createdAt: item.createdAt?.S ?? '',
  };
}
