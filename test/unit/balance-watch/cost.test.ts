/**
 * The balance watch's monthly cost, before (a full sweep every minute) and after (the stream, an
 * hourly sweep, the outbox every five minutes), from the calls its code makes, counted here on the
 * in-memory stores, and the read units each costs (lib/local/dynamodb-units.ts, DynamoDB's own
 * arithmetic, on a watch item and an account item as the adapter writes them). Held equal to the
 * figures docs/cost.md states. Prices: DynamoDB on-demand $0.125 per million read request units, Lambda
 * $0.20 per million requests (US East list prices); the stream's GetRecords are free when Lambda
 * reads them for a trigger (the DynamoDB developer guide, "Evaluate your DynamoDB streams usage").
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runWatch, type WatchDeps, watchAccounts } from '../../../functions/balance-watch/watch.js';
import { itemSize, readUnits } from '../../../lib/local/dynamodb-units.js';
import { MemoryWatchStore } from '../../support/memory-watch.js';

const CENT = 10_000_000n;
const MINUTES_A_MONTH = (60 * 24 * 365) / 12; // 43,800
const USD_PER_READ_UNIT = 0.125 / 1e6;
const USD_PER_INVOCATION = 0.2 / 1e6;

/** A watch item and an account item as the adapter writes them (watch.ts, watch-copy.ts). */
const WATCH_ITEM = {
  id: { S: 'watch#acct-0123456789abcdef' },
  watchList: { S: 'watch' },
  accountId: { S: 'acct-0123456789abcdef' },
  email: { S: 'someone.with.a.long.name@example.com' },
  updatedAt: { S: '2026-12-07T22:00:00.000Z' },
  thresholdCents: { N: '500' },
  alertState: { S: 'armed' },
  alertSeq: { N: '3' },
  autoBelowCents: { N: '800' },
  autoBuyCents: { N: '2000' },
  autoEnabled: { BOOL: true },
  stripeCustomer: { S: 'cus_0123456789abcd' },
  paymentMethod: { S: 'pm_0123456789abcdefghijklmn' },
  cardBrand: { S: 'visa' },
  cardLast4: { S: '4242' },
  cardFrom: { N: '1796680000' },
  topUpSeq: { N: '2' },
};

/** Counts each call of the stores the watch makes. */
function counted(accounts: number) {
  const watches = new MemoryWatchStore();
  const calls = { watchPage: 0, getWatch: 0, getAccount: 0, pendingMessages: 0, sweepCursor: 0 };
  const count = <T extends (...args: never[]) => unknown>(name: keyof typeof calls, fn: T): T =>
    ((...args: never[]) => {
      calls[name] += 1;
      return fn(...args);
    }) as T;
  watches.watchPage = count('watchPage', watches.watchPage.bind(watches));
  watches.getWatch = count('getWatch', watches.getWatch.bind(watches));
  watches.pendingMessages = count('pendingMessages', watches.pendingMessages.bind(watches));
  watches.sweepCursor = count('sweepCursor', watches.sweepCursor.bind(watches));
  const deps: WatchDeps = {
    watches,
    store: { getAccount: count('getAccount', async () => ({ balanceNano: 1_000n * CENT }) as never) },
    payments: async () => {
      throw new Error('no payment in this count');
    },
    mailer: { send: async () => 'id' },
    from: 'watch@example.com',
    now: () => new Date('2026-12-07T22:00:00Z'),
  };
  return {
    calls,
    deps,
    setUp: async () => {
      for (let i = 0; i < accounts; i++)
        await watches.setAlert(`acct-${i}`, 500, 'someone@example.com', '2026-12-07T00:00:00Z');
    },
  };
}

const pageUnits = readUnits(100 * itemSize(WATCH_ITEM), false);
/** Read units of one sweep over `accounts`: its pages (eventually consistent) and one read per account. */
async function sweepUnits(accounts: number) {
  const c = counted(accounts);
  await c.setUp();
  await runWatch(c.deps, Number.POSITIVE_INFINITY);
  // Each account's balance is one strongly consistent GetItem of an account item under 4 KB (1 unit);
  // the outbox an empty Query (counted at 1 unit); the cursor a GetItem.
  return (
    c.calls.getAccount * 1 + c.calls.watchPage * pageUnits + c.calls.pendingMessages + c.calls.sweepCursor
  );
}

const usd = (value: number) => `$${value.toFixed(2)}`;

describe('the balance watch’s cost', () => {
  it('is counted from its calls, and docs/cost.md states it', async () => {
    expect(itemSize(WATCH_ITEM)).toBeLessThan(4096 / 10);
    // One sweep over 1,000 accounts: 1,000 balance reads and 10 pages; per account, scaled.
    const perAccount = (await sweepUnits(1_000)) / 1_000;
    expect(perAccount).toBeGreaterThan(1);
    expect(perAccount).toBeLessThan(1.1);
    // A crossing from the stream: the watch item and the balance read, then the outbox.
    const crossing = counted(1);
    await crossing.setUp();
    await watchAccounts(crossing.deps, ['acct-0']);
    const crossingUnits =
      crossing.calls.getWatch + crossing.calls.getAccount + crossing.calls.pendingMessages;
    expect(crossingUnits).toBe(3);

    const rows = [10_000, 100_000].map((accounts) => {
      const before =
        MINUTES_A_MONTH * (perAccount * accounts) * USD_PER_READ_UNIT + MINUTES_A_MONTH * USD_PER_INVOCATION;
      const sweeps = (MINUTES_A_MONTH / 60) * perAccount * accounts * USD_PER_READ_UNIT;
      const outbox = (MINUTES_A_MONTH / 5) * (1 * USD_PER_READ_UNIT + USD_PER_INVOCATION);
      const invocations = (MINUTES_A_MONTH / 60) * USD_PER_INVOCATION;
      // One crossing an account a month, for scale: an invocation and three read units each.
      const crossings = accounts * (USD_PER_INVOCATION + crossingUnits * USD_PER_READ_UNIT);
      return `| ${accounts.toLocaleString('en-US')} | ${usd(before)} | ${usd(sweeps + outbox + invocations)} | ${usd(crossings)} |`;
    });
    // Cells compared without their padding (a formatter may align the table).
    const doc = readFileSync(new URL('../../../docs/cost.md', import.meta.url), 'utf8').replace(/ +/g, ' ');
    for (const row of rows) expect(doc, rows.join('\n')).toContain(row);
  });
});
