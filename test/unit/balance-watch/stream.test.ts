/**
 * The balance watch's stream side, without DynamoDB: the levels a watch's settings set; the mapping's
 * filters (as the local stand-in evaluates Lambda's rules) passing an item below its level or back
 * above it from below, and nothing else; which passed records may change what the watch does; and
 * the safety sweep's pages, its budget and its place kept between runs.
 */
import type { AttributeValue, DynamoDBRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { accountsToWatch, mayAct, STREAM_FILTERS } from '../../../functions/balance-watch/stream.js';
import { runWatch, type WatchDeps } from '../../../functions/balance-watch/watch.js';
import { topLevel, watchLevels } from '../../../functions/core/watch-levels.js';
import { passes } from '../../../lib/local/stream-filter.js';
import { MemoryWatchStore } from '../../support/memory-watch.js';

const CENT = 10_000_000n;
type Image = Record<string, AttributeValue>;
const n = (value: bigint) => ({ N: value.toString() });

/** An account item as the stream carries it: its balance, and the levels copied onto it (cents). */
function image(
  accountId: string,
  cents: bigint,
  levels: { alert?: bigint; topUp?: bigint } = {},
  extra: Image = {},
): Image {
  const alert = levels.alert === undefined ? undefined : levels.alert * CENT;
  const topUp = levels.topUp === undefined ? undefined : levels.topUp * CENT;
  const level = topLevel({
    ...(alert !== undefined ? { alertNano: alert } : {}),
    ...(topUp !== undefined ? { topUpNano: topUp } : {}),
  });
  return {
    accountId: { S: accountId },
    creditBalance: n(cents * CENT),
    ...(level !== undefined
      ? { watchNano: n(level), watchMargin: n(cents * CENT - level), watchAt: { S: '2026-01-01T00:00:00Z' } }
      : {}),
    ...(alert !== undefined ? { watchAlertNano: n(alert) } : {}),
    ...(topUp !== undefined ? { watchTopUpNano: n(topUp) } : {}),
    ...extra,
  };
}
const record = (now: Image, before?: Image): DynamoDBRecord => ({
  eventName: before ? 'MODIFY' : 'INSERT',
  eventSource: 'aws:dynamodb',
  dynamodb: {
    Keys: { accountId: now.accountId as AttributeValue },
    NewImage: now,
    ...(before ? { OldImage: before } : {}),
  },
});
const filtered = (r: DynamoDBRecord) => passes(STREAM_FILTERS, r);

describe('the levels', () => {
  it('are the alert threshold and, while on, auto top-up’s level; the higher is the one compared', () => {
    expect(watchLevels(undefined)).toEqual({});
    const watch = { accountId: 'a', alertState: 'armed' as const, alertSeq: 0, topUpSeq: 0 };
    expect(watchLevels({ ...watch, thresholdCents: 500 })).toEqual({ alertNano: 500n * CENT });
    const auto = { belowCents: 800, buyCents: 2_000, enabled: true };
    expect(watchLevels({ ...watch, thresholdCents: 500, autoTopUp: auto })).toEqual({
      alertNano: 500n * CENT,
      topUpNano: 800n * CENT,
    });
    expect(watchLevels({ ...watch, autoTopUp: { ...auto, enabled: false } })).toEqual({});
    expect(topLevel({ alertNano: 500n, topUpNano: 800n })).toBe(800n);
    expect(topLevel({ alertNano: 900n, topUpNano: 800n })).toBe(900n);
    expect(topLevel({})).toBeUndefined();
  });
});

describe('the mapping’s filters', () => {
  it('pass an item below its level, and one back above from below; nothing above, nothing unwatched', () => {
    // Crossing below.
    expect(filtered(record(image('a', 400n, { alert: 500n }), image('a', 600n, { alert: 500n })))).toBe(true);
    // Above before and after: the settlements of most accounts.
    expect(filtered(record(image('a', 900n, { alert: 500n }), image('a', 1_000n, { alert: 500n })))).toBe(
      false,
    );
    // Exactly at the level is not below.
    expect(filtered(record(image('a', 500n, { alert: 500n }), image('a', 600n, { alert: 500n })))).toBe(
      false,
    );
    // Back above from below (a top-up): the alert re-arms.
    expect(filtered(record(image('a', 2_400n, { alert: 500n }), image('a', 400n, { alert: 500n })))).toBe(
      true,
    );
    // No levels: an unwatched account, however low (its margin, if any, is no one's).
    expect(filtered(record(image('a', -5n, {}, { watchMargin: n(-1n) }), image('a', 1n)))).toBe(false);
    // A balance of a trillion nano-USD and more (no numeric range to overflow: the sign's text).
    expect(filtered(record(image('a', 10n ** 9n, { alert: 10n ** 9n + 1n }), image('a', 10n ** 10n)))).toBe(
      true,
    );
  });
});

describe('which passed records may change what the watch does', () => {
  it('a crossing either way, new levels, a credit while below, any slice; not a settlement that stays below', () => {
    const levels = { alert: 500n, topUp: 300n };
    expect(mayAct(record(image('a', 400n, levels), image('a', 600n, levels)))).toBe(true);
    expect(mayAct(record(image('a', 400n, levels), image('a', 450n, levels)))).toBe(false);
    // Below the alert already, now below auto top-up's level too.
    expect(mayAct(record(image('a', 250n, levels), image('a', 400n, levels)))).toBe(true);
    expect(mayAct(record(image('a', 600n, levels), image('a', 400n, levels)))).toBe(true);
    // A top-up short of the level: another may be due.
    expect(mayAct(record(image('a', 280n, levels), image('a', 100n, levels)))).toBe(true);
    const newLevels = image('a', 400n, { alert: 450n }, { watchAt: { S: '2026-02-01T00:00:00Z' } });
    expect(mayAct(record(newLevels, image('a', 400n, levels)))).toBe(true);
    // A slice, or a split account's item: its one item tells too little.
    expect(
      mayAct(record(image('a#1', 40n, levels, { sliceOf: { S: 'a' } }), image('a#1', 41n, levels))),
    ).toBe(true);
    expect(mayAct(record(image('a', 40n, levels, { slices: n(2n) }), image('a', 41n, levels)))).toBe(true);
  });

  it('names each account once, a slice by its account', () => {
    const levels = { alert: 500n };
    const records = [
      record(image('a', 400n, levels), image('a', 600n, levels)),
      record(image('a', 300n, levels), image('a', 400n, levels)),
      record(image('b#2', 10n, levels, { sliceOf: { S: 'b' } }), image('b#2', 11n, levels)),
      record(
        image('a', 350n, { alert: 360n }, { watchAt: { S: '2026-03-01T00:00:00Z' } }),
        image('a', 350n, levels),
      ),
    ];
    expect(accountsToWatch(records)).toEqual(['a', 'b']);
  });
});

describe('the safety sweep', () => {
  const deps = (
    watches: MemoryWatchStore,
    clock: { ms: number },
    balances: Map<string, bigint>,
  ): WatchDeps => ({
    watches,
    store: {
      getAccount: async (accountId: string) => {
        clock.ms += 1_000;
        return { balanceNano: balances.get(accountId) ?? 0n } as never;
      },
    },
    payments: async () => {
      throw new Error('no payments here');
    },
    mailer: { send: async () => 'id' },
    from: 'watch@example.com',
    now: () => new Date(clock.ms),
  });

  it('copies the levels of a watch saved before they were copied, once', async () => {
    const watches = new MemoryWatchStore();
    await watches.setAlert('old', 500, 'old@example.com', '2026-01-01T00:00:00Z');
    delete (watches.watches.get('old') as { levelsCopied?: boolean }).levelsCopied;
    const copied: string[] = [];
    const copyLevels = watches.copyLevels.bind(watches);
    watches.copyLevels = async (accountId: string) => {
      copied.push(accountId);
      await copyLevels(accountId);
    };
    const clock = { ms: Date.parse('2026-01-01T00:00:00Z') };
    await runWatch(deps(watches, clock, new Map([['old', 1_000n * CENT]])));
    await runWatch(deps(watches, clock, new Map([['old', 1_000n * CENT]])));
    expect(copied).toEqual(['old']);
  });

  it('reads a page at a time, stops at its budget and goes on next run where it stopped', async () => {
    const watches = new MemoryWatchStore();
    const balances = new Map<string, bigint>();
    for (let i = 0; i < 250; i++) {
      const accountId = `acct-${String(i).padStart(3, '0')}`;
      await watches.setAlert(accountId, 500, `${accountId}@example.com`, '2026-01-01T00:00:00Z');
      balances.set(accountId, 1_000n * CENT);
    }
    const clock = { ms: Date.parse('2026-01-01T00:00:00Z') };
    // Each account read takes a (fake) second: a 150-second budget covers two pages, not three.
    const first = await runWatch(deps(watches, clock, balances), 150_000);
    expect(first.watched).toBe(200);
    expect(await watches.sweepCursor()).toBe('acct-199');
    const second = await runWatch(deps(watches, clock, balances), 150_000);
    expect(second.watched).toBe(50);
    expect(await watches.sweepCursor()).toBeUndefined();
  });
});
