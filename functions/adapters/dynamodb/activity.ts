/**
 * Activity in DynamoDB: spend per UTC day by tier, exact, without reading the ledger per view, and
 * the account's charges a page at a time.
 *
 * Design and cost (docs/billing.md, "Activity: daily totals"):
 * - The settlement's own update of the slice item (ledger.ts) adds the charge to a counter of its
 *   UTC day (utcDay of the entry's createdAt, the day the list and the CSV show) and tier,
 *   `d_<YYYYMMDD>_<tier>`. No item is added to the transaction, and it is as idempotent as the
 *   transaction is: a retried or replayed settlement fails on its ledger entry and adds nothing.
 *   What it costs is the counters' bytes on the slice item (some 35 bytes per tier that spent on the
 *   slice in a day not rolled up yet): a transactional write is 2 units per KB of the item, so a
 *   settlement costs more only if these bytes take the slice item past a KB boundary.
 * - The sweeper's balance check (every 15 minutes) scans the accounts table and rolls every counter
 *   of a day before today into the account's day item `<accountId>#day#<YYYY-MM-DD>` (accounts
 *   table; every scan of accounts skips ids with `#`): one transaction per slice item, which REMOVEs
 *   the counters conditioned on the values it read, ADDs them to the day items and ADDs 1 to the
 *   slice's `rolls`. A counter moves once: a second run (or a resend) finds the counter gone or
 *   changed and its condition fails. A late settlement of a rolled day adds the counter again, and
 *   the next roll-up moves that too. A slice item keeps today's counters and, until the first roll-up
 *   after midnight, yesterday's: bounded by the tiers used.
 * - A view reads the slice items, the day items, then the slices' `rolls` again: unchanged, no
 *   roll-up committed between the reads, so every amount was read once, on its slice or in its day
 *   item (a roll-up changes both in one transaction); changed, it reads again. Unsplit account:
 *   1 + 2 x slices GetItems and 30 of day items (a read unit each), whatever the number of charges.
 */

import { randomUUID } from 'node:crypto';
import type { GetItemCommandOutput, QueryCommandOutput } from '@aws-sdk/client-dynamodb';
import {
  type ChargePage,
  cursorEntry,
  type DaySpend,
  type LedgerEntry,
  newestFirst,
  secondOfId,
} from '../../core/store.js';
import {
  accountOfItem,
  dayCounters,
  dayItemKey,
  type Item,
  keyDayCounters,
  N,
  S,
  sliceKey,
  slicesOf,
  toLedgerEntry,
} from './items.js';
import {
  cancellationReasons,
  isRetryableSettlementError,
  pages,
  requestToken,
  StorePart,
} from './store-db.js';

const DAY_MS = 86_400_000;

/** The `days` UTC days up to and including `today` (`YYYY-MM-DD`), oldest first. */
export function daysUpTo(today: string, days: number): string[] {
  const end = Date.parse(`${today}T00:00:00Z`);
  return Array.from({ length: days }, (_, i) =>
    new Date(end - (days - 1 - i) * DAY_MS).toISOString().slice(0, 10),
  );
}

/** Generation ids sort by their creation second (`gen-<unix seconds>-...`): this bounds them all. */
const FIRST_ID = 'gen-';
const LAST_ID = 'gen-~';

export class Activity extends StorePart {
  private async getItem(key: string, projection?: string): Promise<Item | undefined> {
    const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: this.tables.accounts,
      Key: { accountId: S(key) },
      ConsistentRead: true,
      ...(projection ? { ProjectionExpression: projection } : {}),
    });
    return out.Item;
  }

  private async sliceItems(accountId: string, slices: number, projection?: string): Promise<Item[]> {
    const items = await Promise.all(
      Array.from({ length: slices }, (_, slice) => this.getItem(sliceKey(accountId, slice), projection)),
    );
    return items.map((item) => item ?? {});
  }

  /**
   * The rolled-up day items of `days` (undefined for a day with none), strongly consistent, in
   * BatchGetItem calls of 100 keys: one call for a 30-day view, where a GetItem a day was 30.
   */
  private async dayItems(accountId: string, days: string[]): Promise<(Item | undefined)[]> {
    const found = new Map<string | undefined, Item>();
    for (let start = 0; start < days.length; start += 100) {
      const keys = days
        .slice(start, start + 100)
        .map((day) => ({ accountId: S(dayItemKey(accountId, day)) }));
      const items = await this.batchGet(this.tables.accounts, keys, { consistent: true, attempts: 5 });
      for (const item of items) found.set(item.accountId?.S, item);
    }
    return days.map((day) => found.get(dayItemKey(accountId, day)));
  }

  async dailySpend(accountId: string, options: { today: string; days: number }): Promise<DaySpend[]> {
    const days = daysUpTo(options.today, options.days);
    const head = await this.getItem(accountId, 'slices');
    if (!head) return days.map((day) => ({ day, byTier: {} }));
    const slices = slicesOf(head);
    for (let attempt = 1; ; attempt++) {
      const sliceItems = await this.sliceItems(accountId, slices);
      const dayItems = await this.dayItems(accountId, days);
      const rolls = await this.sliceItems(accountId, slices, 'rolls');
      const unchanged = rolls.every((item, i) => item.rolls?.N === sliceItems[i]?.rolls?.N);
      if (!unchanged && attempt < 5) continue;
      if (!unchanged) throw new Error(`activity of ${accountId}: roll-ups kept changing it while read`);
      const spend = new Map(days.map((day) => [day, {} as Record<string, bigint>]));
      const add = (day: string, tier: string, nano: bigint) => {
        const byTier = spend.get(day);
        if (byTier) byTier[tier] = (byTier[tier] ?? 0n) + nano;
      };
      days.forEach((day, i) => {
        for (const [attribute, value] of Object.entries(dayItems[i] ?? {}))
          if (attribute.startsWith('s_') && value.N) add(day, attribute.slice(2), BigInt(value.N));
      });
      for (const item of sliceItems) for (const c of dayCounters(item)) add(c.day, c.tier, c.nano);
      return days.map((day) => ({ day, byTier: spend.get(day) ?? {} }));
    }
  }

  /**
   * A page of charges, newest first (newestFirst: createdAt to the ms, then id): Queries of each slice
   * partition by id, newest second first, merged. Ids order only whole seconds, so each slice is read
   * until it has `limit + 1` charges of seconds before the cursor's and the whole of the last second
   * it reached (its charges' order within that second is known only once all of them are read); the
   * cursor's own second is read whole too, to place the cursor in it. Not a total: only what is listed.
   */
  async listCharges(accountId: string, options: { limit: number; after?: string }): Promise<ChargePage> {
    const head = await this.getItem(accountId, 'slices');
    if (!head) return { charges: [] };
    const { after } = options;
    // The whole of the cursor's second: every id that begins `gen-<second>-`.
    const upper = after ? `gen-${secondOfId(after)}-~` : LAST_ID;
    const perSlice = await Promise.all(
      Array.from({ length: slicesOf(head) }, (_, slice) =>
        this.chargesDown(sliceKey(accountId, slice), upper, options.limit + 1, after && secondOfId(after)),
      ),
    );
    const read = perSlice.flat().filter((entry) => entry.type === 'charge');
    const cursor = after === undefined ? undefined : cursorEntry(after, read);
    const all = read.filter((entry) => !cursor || newestFirst(cursor, entry) < 0).sort(newestFirst);
    const charges = all.slice(0, options.limit);
    const last = charges.at(-1);
    return all.length > options.limit && last ? { charges, next: last.entryId } : { charges };
  }

  /**
   * One slice's ledger entries from `upper` down, by id: at least `wanted` of seconds other than
   * `skipSecond` (the cursor's, read whole but not counted), and every entry of the last second read.
   */
  private async chargesDown(
    key: string,
    upper: string,
    wanted: number,
    skipSecond: string | undefined,
  ): Promise<LedgerEntry[]> {
    const read: LedgerEntry[] = [];
    let counted = 0;
    let lastSecond: string | undefined;
    let start: Item | undefined;
    do {
      const out: QueryCommandOutput = await this.wire.call<QueryCommandOutput>('Query', {
        TableName: this.tables.ledger,
        KeyConditionExpression: 'accountId = :a AND entryId BETWEEN :lo AND :hi',
        ExpressionAttributeValues: { ':a': S(key), ':lo': S(FIRST_ID), ':hi': S(upper) },
        ScanIndexForward: false,
        Limit: wanted + 1,
        ConsistentRead: true,
        ...(start ? { ExclusiveStartKey: start } : {}),
      });
      for (const item of out.Items ?? []) {
        const entry = toLedgerEntry(item);
        const second = secondOfId(entry.entryId);
        if (lastSecond !== undefined && second !== lastSecond) return read;
        read.push(entry);
        if (second !== skipSecond && ++counted === wanted) lastSecond = second;
      }
      start = out.LastEvaluatedKey;
    } while (start);
    return read;
  }

  /**
   * Moves every day counter of a day before `today` into its account's day item (the design above),
   * over the whole accounts table: a Scan, then one transaction per slice item that has any. A
   * counter that changed since it was read (a late settlement) is read again; what still fails is
   * left for the next run. Returns how many slice items were rolled up.
   */
  async rollUp(today: string): Promise<number> {
    let rolled = 0;
    for await (const page of pages<{ Items?: Item[]; LastEvaluatedKey?: Item }>(this.wire, 'Scan', {
      TableName: this.tables.accounts,
    })) {
      for (const item of page.Items ?? []) {
        if (!dayCounters(item).some((c) => c.day < today) && !keyDayCounters(item).some((c) => c.day < today))
          continue;
        if (await this.rollUpItem(item, today)) rolled += 1;
      }
    }
    return rolled;
  }

  private async rollUpItem(read: Item, today: string): Promise<boolean> {
    let item: Item | undefined = read;
    for (let attempt = 1; item && attempt <= 5; attempt++) {
      // At most 90 days a transaction (100 items at most): the rest at the next run.
      const days = [...new Set(dayCounters(item).map((c) => c.day))].filter((day) => day < today).sort();
      const counters = dayCounters(item).filter((c) => c.day < today && c.day <= (days[89] ?? today));
      // Keys' day counters of past days (their daily caps', core/store.ts): only removed, conditioned
      // on the value read as the others are; the ledger and the tier counters keep the spend. At most
      // 60 a transaction (the expression's size), the rest at the next run. A release of a hold of a
      // removed day adds a negative counter back, which the next run removes.
      const keyCounters = keyDayCounters(item)
        .filter((c) => c.day < today)
        .slice(0, 60);
      if (counters.length === 0 && keyCounters.length === 0) return false;
      const key = item.accountId?.S ?? '';
      const account = accountOfItem(item);
      const names: Record<string, string> = {};
      const values: Item = { ':one': N(1) };
      const conditions: string[] = [];
      const byDay = new Map<string, { tier: string; at: number }[]>();
      counters.forEach((c, i) => {
        names[`#c${i}`] = c.attribute;
        values[`:c${i}`] = N(c.nano);
        conditions.push(`#c${i} = :c${i}`);
        byDay.set(c.day, [...(byDay.get(c.day) ?? []), { tier: c.tier, at: i }]);
      });
      keyCounters.forEach((c, i) => {
        names[`#k${i}`] = c.attribute;
        values[`:k${i}`] = N(c.nano);
        conditions.push(`#k${i} = :k${i}`);
      });
      const dayUpdates = [...byDay].map(([day, tiers]) => ({
        Update: {
          TableName: this.tables.accounts,
          Key: { accountId: S(dayItemKey(account, day)) },
          UpdateExpression: `ADD ${tiers.map(({ at }) => `#s${at} :c${at}`).join(', ')}`,
          ExpressionAttributeNames: Object.fromEntries(tiers.map(({ tier, at }) => [`#s${at}`, `s_${tier}`])),
          ExpressionAttributeValues: Object.fromEntries(
            tiers.map(({ at }) => [`:c${at}`, N(counters[at]?.nano ?? 0n)]),
          ),
        },
      }));
      try {
        await this.wire.call('TransactWriteItems', {
          ClientRequestToken: requestToken('rollup', `${key}:${randomUUID()}`),
          TransactItems: [
            {
              Update: {
                TableName: this.tables.accounts,
                Key: { accountId: S(key) },
                UpdateExpression: `REMOVE ${Object.keys(names).join(', ')} ADD rolls :one`,
                ConditionExpression: conditions.join(' AND '),
                ExpressionAttributeNames: names,
                ExpressionAttributeValues: values,
              },
            },
            ...dayUpdates,
          ],
        });
        return true;
      } catch (error) {
        if (!cancellationReasons(error) && !isRetryableSettlementError(error)) throw error;
        item = await this.getItem(key);
      }
    }
    return false;
  }
}
