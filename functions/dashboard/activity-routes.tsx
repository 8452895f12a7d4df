/** @jsxImportSource hono/jsx */
/**
 * GET /dashboard/activity and /dashboard/activity.csv: the session's account only (the session
 * middleware of pages-routes.tsx runs first). The CSV of a page is exactly the page's rows: both read
 * the same page of charges, by the same cursor (`after`).
 */
import type { Hono } from 'hono';
import { GENERATION_ID_PATTERN } from '../core/ids.js';
import { type Store, utcDay } from '../core/store.js';
import { ACTIVITY_DAYS, ACTIVITY_PAGE, ActivityPage, csvOf } from './activity.js';
import type { DashboardEnv } from './deps.js';

/** A cursor is a generation id a previous page ended on; anything else is the first page. */
const cursorOf = (after: string | undefined) => (after && GENERATION_ID_PATTERN.test(after) ? { after } : {});

export function activityRoutes(routes: Hono<DashboardEnv>, store: Store, now: () => Date): void {
  routes.get('/activity', async (c) => {
    const { accountId } = c.var.session;
    const cursor = cursorOf(c.req.query('after'));
    const [days, keys, page] = await Promise.all([
      store.dailySpend(accountId, { today: utcDay(now().toISOString()), days: ACTIVITY_DAYS }),
      store.listKeys(accountId),
      store.listCharges(accountId, { limit: ACTIVITY_PAGE, ...cursor }),
    ]);
    // Every key's total in one pass over the account's slices, however many keys it has.
    const keyUsage = await store.keysUsage(
      accountId,
      keys.map((k) => k.keyId),
    );
    return c.html(
      <ActivityPage
        days={days}
        keys={keys}
        keyUsage={keyUsage}
        charges={page.charges}
        {...cursor}
        {...(page.next ? { next: page.next } : {})}
      />,
    );
  });

  routes.get('/activity.csv', async (c) => {
    const { accountId } = c.var.session;
    const [keys, page] = await Promise.all([
      store.listKeys(accountId),
      store.listCharges(accountId, { limit: ACTIVITY_PAGE, ...cursorOf(c.req.query('after')) }),
    ]);
    c.header('content-type', 'text/csv; charset=utf-8');
    c.header('content-disposition', 'attachment; filename="activity.csv"');
    return c.body(csvOf(page.charges, keys));
  });
}
