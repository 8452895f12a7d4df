/** @jsxImportSource hono/jsx */
/**
 * Settings → API: a key's daily spend cap (billing/key-cap.ts enforces it on the API: a 402 once the
 * key has spent it in the UTC day). Shown beside each active key with what the key spent today, set
 * or removed by a form of its own; the amount is checked on the server ($0.01 to $10,000, whole cents).
 * Only while per-key daily caps are on (DashboardDeps.keyDailyCaps); off, the page has none of this.
 */
import type { Hono } from 'hono';
import { dayOf } from '../billing/key-cap.js';
import { KeyNotFoundError, type KeyRecord, type Store } from '../core/store.js';
import { centsToNano, InvalidPurchaseAmountError, keyCapCents } from '../payments/amounts.js';
import { keysWith, MAX_ACTIVE_KEYS } from './accounts.js';
import type { DashboardEnv } from './app.js';
import { KeysPage, MessagePage, usd } from './pages.js';
import { redirectAfterPost } from './sessions.js';

/** What each active key spent today (UTC), over the account's slices: the page's cap column. */
async function spentToday(store: Store, accountId: string, keys: KeyRecord[], now: Date) {
  const day = dayOf(now.getTime());
  const active = keys.filter((key) => key.status === 'active');
  return store.keysDailySpend(
    accountId,
    active.map((key) => key.keyId),
    day,
  );
}

/**
 * The Settings → API page of an account; with caps on, its keys' caps and spend of the day beside
 * them (caps off: the day's spend is not even read).
 */
export async function keysPage(
  store: Store,
  accountId: string,
  now: Date,
  caps: boolean,
  extra: { changed?: KeyRecord; created?: { name: string; key: string }; error?: string } = {},
) {
  const keys = await keysWith(store, accountId, extra.changed);
  const spent = caps ? await spentToday(store, accountId, keys, now) : undefined;
  return (
    <KeysPage
      keys={keys}
      {...(spent ? { spent } : {})}
      maxKeys={MAX_ACTIVE_KEYS}
      {...(extra.created ? { created: extra.created } : {})}
      {...(extra.error ? { error: extra.error } : {})}
    />
  );
}

/** Whether an active key has spent its daily cap today (UTC): its status says so. */
export const capReached = (key: KeyRecord, spentNano: bigint): boolean =>
  key.dailyCapNano !== undefined && spentNano >= key.dailyCapNano;

/** The cap cell of one active key: the cap and today's spend, and the form that sets or removes it. */
export function KeyCapCell(props: { keyRecord: KeyRecord; spentNano: bigint }) {
  const { keyRecord: key } = props;
  const cap = key.dailyCapNano;
  return (
    <>
      <p>
        {cap === undefined ? 'No cap' : `${usd(cap)} a day`}, {usd(props.spentNano)} spent today (UTC)
      </p>
      <form method="post" action={`/dashboard/settings/api/keys/${key.keyId}/cap`} class="inline">
        <label for={`cap-${key.keyId}`}>Daily cap, USD (empty: none)</label>
        <input id={`cap-${key.keyId}`} name="cap" inputmode="decimal" maxlength={12} />
        <button type="submit">Set cap</button>
      </form>
    </>
  );
}

/** POST /settings/api/keys/:keyId/cap: `cap` in dollars sets it, empty removes it; another account's key: 404. */
export function keyCapRoute(routes: Hono<DashboardEnv>, store: Store, now: () => Date): void {
  routes.post('/settings/api/keys/:keyId/cap', async (c) => {
    const { accountId } = c.var.session;
    const form = await c.req.parseBody();
    const typed = typeof form.cap === 'string' ? form.cap.trim().slice(0, 40) : '';
    let capNano: bigint | undefined;
    try {
      capNano = typed === '' ? undefined : centsToNano(keyCapCents(typed));
    } catch (error) {
      if (!(error instanceof InvalidPurchaseAmountError)) throw error;
      return c.html(await keysPage(store, accountId, now(), true, { error: error.message }), 400);
    }
    let changed: KeyRecord;
    try {
      changed = await store.setKeyDailyCap(accountId, c.req.param('keyId'), capNano);
    } catch (error) {
      if (!(error instanceof KeyNotFoundError)) throw error;
      return c.html(
        <MessagePage title="Not found" message="There is no such key on your account." signedIn={true} />,
        404,
      );
    }
    return redirectAfterPost(c, store, c.var.session, '/dashboard/settings/api', now(), {
      changedKeyHash: changed.keyHash,
    });
  });
}
