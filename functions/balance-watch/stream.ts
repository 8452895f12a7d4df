/**
 * The balance watch on the accounts table's stream (NEW_AND_OLD_IMAGES): Lambda's event source mapping
 * polls it and invokes the watch only with the records STREAM_FILTERS pass, which compare the levels
 * copied onto each account and slice item (functions/core/watch-levels.ts) with its balance through
 * `watchMargin`'s sign, so a settlement of an account above its levels costs no invocation at all.
 * Of the records passed, accountsToWatch keeps the accounts whose record may change what the watch
 * does (a crossing of a level either way, new levels, a credit while below: another auto top-up may be
 * due, or anything on a split account, whose one slice tells too little), each then read and acted on
 * as the safety sweep would (watch.ts, watchAccounts). Pure: the CDK stack and the local stack's
 * stand-in for the event source mapping read the same filters.
 */
import type { AttributeValue, DynamoDBRecord } from 'aws-lambda';

const BELOW = [{ prefix: '-' }];
/** A number that is zero or more: its text begins with a digit. */
const NOT_BELOW = ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'].map((digit) => ({ prefix: digit }));
const WATCHED = { N: [{ exists: true }] };

/** The event source mapping's filters (a record passes when any one matches): Lambda's filter rule syntax. */
export const STREAM_FILTERS: readonly Record<string, unknown>[] = [
  // A watched item whose balance is below its level now (a crossing, a settlement while below, new levels).
  { dynamodb: { NewImage: { watchNano: WATCHED, watchMargin: { N: BELOW } } } },
  // One back at or above its level from below (a top-up): the alert is armed again.
  {
    dynamodb: {
      NewImage: { watchNano: WATCHED, watchMargin: { N: NOT_BELOW } },
      OldImage: { watchMargin: { N: BELOW } },
    },
  },
];

type Image = Record<string, AttributeValue> | undefined;
const big = (image: Image, name: string): bigint | undefined => {
  const text = image?.[name]?.N;
  return text === undefined ? undefined : BigInt(text);
};

/** Whether a record the filters passed may change what the watch does for its account. */
export function mayAct(record: DynamoDBRecord): boolean {
  const now = record.dynamodb?.NewImage;
  const before = record.dynamodb?.OldImage;
  if (!now) return false;
  // A slice, or an account split into slices: its one item says too little of the total.
  if (now.sliceOf || (big(now, 'slices') ?? 1n) > 1n || !before) return true;
  if (now.watchAt?.S !== before.watchAt?.S) return true;
  const was = big(before, 'creditBalance') ?? 0n;
  const is = big(now, 'creditBalance') ?? 0n;
  const levels = [big(now, 'watchAlertNano'), big(now, 'watchTopUpNano')].filter(
    (level): level is bigint => level !== undefined,
  );
  // Crossed a level, either way.
  if (levels.some((level) => was < level !== is < level)) return true;
  // Credited while still below one (a top-up short of the level: another may be due).
  return is > was && levels.some((level) => is < level);
}

/** The accounts a batch names that the watch should look at, each once, in the batch's order. */
export function accountsToWatch(records: readonly DynamoDBRecord[]): string[] {
  const accounts = new Set<string>();
  for (const record of records) {
    if (!mayAct(record)) continue;
    const key = record.dynamodb?.Keys?.accountId?.S;
    // A slice's item is `<accountId>#<slice>`: its account's.
    const accountId = record.dynamodb?.NewImage?.sliceOf?.S ?? key?.split('#')[0];
    if (accountId) accounts.add(accountId);
  }
  return [...accounts];
}
