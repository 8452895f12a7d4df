/** @jsxImportSource hono/jsx */
/**
 * Settings → API: the keys page (create, show once, revoke), and a key's daily spend cap
 * (billing/key-cap.ts enforces it on the API: a 402 once the
 * key has spent it in the UTC day). Shown beside each active key with what the key spent today, set
 * or removed by a form of its own; the amount is checked on the server ($0.01 to $10,000, whole cents).
 * Only while per-key daily caps are on (DashboardDeps.keyDailyCaps); off, the page has none of this.
 */
import type { Hono } from 'hono';
import { dayOf } from '../billing/key-cap.js';
import { KeyNotFoundError, type KeyRecord, type Store } from '../core/store.js';
import { centsToNano, InvalidPurchaseAmountError, keyCapCents } from '../payments/amounts.js';
import { keysWith, MAX_ACTIVE_KEYS } from './accounts.js';
import type { DashboardEnv } from './deps.js';
import { allowed, ConfirmAction, Layout, MessagePage, usd, when } from './pages.js';
import { redirectAfterPost } from './sessions.js';
import { auditOf } from './team-access.js';

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
const capReached = (key: KeyRecord, spentNano: bigint): boolean =>
  key.dailyCapNano !== undefined && spentNano >= key.dailyCapNano;

/** The cap cell of one active key: the cap and today's spend, and the form that sets or removes it. */
function KeyCapCell(props: { keyRecord: KeyRecord; spentNano: bigint }) {
  const { keyRecord: key } = props;
  const cap = key.dailyCapNano;
  return (
    <>
      <p>
        {cap === undefined ? 'No cap' : `${usd(cap)} a day`}, {usd(props.spentNano)} spent today (UTC)
      </p>
      <form method="post" action={`/dashboard/settings/api/keys/${key.keyId}/cap`} class="inline">
        <label for={`cap-${key.keyId}`}>Daily cap, USD (empty: none)</label>
        <input id={`cap-${key.keyId}`} name="cap" inputmode="decimal" maxlength={12} size={8} />
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
    const keyId = c.req.param('keyId');
    const cap = capNano === undefined ? 'none' : `${usd(capNano)} a day`;
    const audit = auditOf(c, 'key.cap_changed', now().toISOString(), { target: keyId, details: { cap } });
    try {
      changed = await store.setKeyDailyCap(accountId, keyId, capNano, { audit });
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

/** An active key's rename and revoke forms. */
function KeyActions(props: { keyRecord: KeyRecord }) {
  const { keyId, name } = props.keyRecord;
  return (
    <div class="actions">
      <form method="post" action={`/dashboard/settings/api/keys/${keyId}/rename`} class="inline">
        <label for={`rename-${keyId}`} class="visually-hidden">
          New name for {name}
        </label>
        <input id={`rename-${keyId}`} name="name" required maxlength={128} value={name} size={12} />
        <button type="submit">Rename</button>
      </form>
      <ConfirmAction
        action={`/dashboard/settings/api/keys/${keyId}/revoke`}
        label="Revoke"
        name={`Revoke ${name}`}
        question={`Revoke "${name}"? Requests with it are refused at once; this cannot be undone.`}
        confirm="Yes, revoke it"
      />
    </div>
  );
}

function KeysPage(props: {
  keys: KeyRecord[];
  created?: { name: string; key: string };
  error?: string;
  maxKeys: number;
  /**
   * Each active key's spend today (UTC), for its cap column (keys-page.tsx). Absent: per-key daily caps
   * are off, and the page has no cap column.
   */
  spent?: Map<string, bigint>;
}) {
  const keys = [...props.keys].sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  const { spent } = props;
  // Creating, renaming, capping and revoking keys: owners and developers (the server checks it too).
  const manage = allowed('keys');
  const spentOf = (key: KeyRecord) => spent?.get(key.keyId) ?? 0n;
  const status = (key: KeyRecord) =>
    key.status !== 'active'
      ? `Revoked ${when(key.revokedAt ?? '')}`
      : spent && capReached(key, spentOf(key))
        ? 'Cap reached today (resets 00:00 UTC)'
        : 'Active';
  return (
    <Layout title="Settings → API" signedIn={true}>
      {props.created ? (
        <section class="notice" aria-live="polite">
          <h2>Key “{props.created.name}” created</h2>
          <p>Copy it now: it is shown this once and never again.</p>
          <p class="copy">
            <input id="new-key" readonly value={props.created.key} aria-label="New API key" />
            <button type="button" data-copy="new-key">
              Copy
            </button>
          </p>
        </section>
      ) : null}
      {props.error ? (
        <p class="error" role="alert">
          {props.error}
        </p>
      ) : null}
      {manage ? (
        <form method="post" action="/dashboard/settings/api/keys" class="inline">
          <label for="key-name">New key name</label>
          <input id="key-name" name="name" required maxlength={128} />
          <button type="submit">Create key</button>
        </form>
      ) : (
        <p class="hint">Your role can see the keys; owners and developers create, rename and revoke them.</p>
      )}
      <p class="hint">
        At most {props.maxKeys} active keys per account. Keys belong to the account, not to who made them.
      </p>
      <table class="stack">
        <caption>The account's API keys</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Key</th>
            <th scope="col">Created</th>
            <th scope="col">Created by</th>
            <th scope="col">Status</th>
            {spent ? <th scope="col">Daily spend cap</th> : null}
            <th scope="col">
              <span class="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {keys.length === 0 ? (
            <tr>
              <td colspan={spent ? 7 : 6}>No keys yet.</td>
            </tr>
          ) : (
            keys.map((key) => (
              <tr>
                <td data-label="Name">{key.name}</td>
                <td data-label="Key">
                  <code>{key.displayPrefix}</code>
                </td>
                <td data-label="Created">{when(key.createdAt)}</td>
                <td data-label="Created by" class="long">
                  {key.createdBy?.email ?? key.createdBy?.subject ?? '—'}
                </td>
                <td data-label="Status">{status(key)}</td>
                {spent ? (
                  <td data-label="Daily spend cap">
                    {key.status === 'active' && manage ? (
                      <KeyCapCell keyRecord={key} spentNano={spentOf(key)} />
                    ) : key.dailyCapNano !== undefined ? (
                      `${usd(key.dailyCapNano)} a day`
                    ) : null}
                  </td>
                ) : null}
                <td>{key.status === 'active' && manage ? <KeyActions keyRecord={key} /> : null}</td>
              </tr>
            ))
          )}
        </tbody>
      </table>
    </Layout>
  );
}
