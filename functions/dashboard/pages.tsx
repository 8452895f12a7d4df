/** @jsxImportSource hono/jsx */
/**
 * The dashboard's pages, rendered on the server with hono/jsx (every value is escaped as text: a key
 * named `<script>` shows as those characters). No inline script or style anywhere: the CSP forbids
 * both (app.tsx); the stylesheet and the copy button's script are files the function serves.
 */
import type { Child } from 'hono/jsx';
import { formatDecimal } from '../billing/money.js';
import type { AccountRecord, KeyRecord, LedgerEntry } from '../core/store.js';
import type { Watch } from '../core/watch.js';
import { capReached, KeyCapCell } from './key-caps.js';

const STATIC = '/dashboard/static';

/** Exact USD from nano-USD, with at least the cents: `$10.00`, `$0.000012345`, `-$3.20`. */
export function usd(nano: bigint): string {
  const text = formatDecimal(nano < 0n ? -nano : nano, 9);
  const [whole, fraction = ''] = text.split('.');
  return `${nano < 0n ? '-' : ''}$${whole}.${fraction.padEnd(2, '0')}`;
}

/** `2025-01-31 14:05 UTC` from an ISO time. */
export const when = (iso: string) =>
  iso.length >= 16 ? `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC` : iso;

export function Layout(props: { title: string; signedIn: boolean; children?: Child }) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{props.title} · Dashboard</title>
        <link rel="stylesheet" href={`${STATIC}/style.css`} />
        <link rel="icon" href={`${STATIC}/favicon.svg`} type="image/svg+xml" />
        <script src={`${STATIC}/copy.js`} defer />
      </head>
      <body>
        <header>
          <a class="brand" href="/dashboard/">
            Dashboard
          </a>
          {props.signedIn ? (
            <nav>
              <a href="/dashboard/settings/api">API keys</a>
              <a href="/dashboard/billing">Billing</a>
              <a href="/dashboard/activity">Activity</a>
              <form method="post" action="/dashboard/sign-out">
                <button type="submit" class="link">
                  Sign out
                </button>
              </form>
            </nav>
          ) : (
            <nav>
              <a href="/dashboard/sign-in">Sign in</a>
            </nav>
          )}
        </header>
        <main>
          <h1>{props.title}</h1>
          {props.children}
        </main>
      </body>
    </html>
  );
}

export function MessagePage(props: { title: string; message: string; signedIn: boolean; link?: Child }) {
  return (
    <Layout title={props.title} signedIn={props.signedIn}>
      <p>{props.message}</p>
      {props.link}
    </Layout>
  );
}

export function HomePage(props: { account?: AccountRecord }) {
  if (!props.account)
    return (
      <Layout title="Welcome" signedIn={false}>
        <p>Sign in to manage your API keys and buy credits.</p>
        <p>
          <a class="button" href="/dashboard/sign-in">
            Sign in
          </a>
        </p>
      </Layout>
    );
  return (
    <Layout title="Overview" signedIn={true}>
      <StatusNotice account={props.account} />
      <p>
        Balance: <strong class="balance">{usd(props.account.balanceNano)}</strong>
      </p>
      <ul>
        <li>
          <a href="/dashboard/settings/api">Settings → API</a>: create and revoke keys
        </li>
        <li>
          <a href="/dashboard/billing">Billing</a>: buy credits, see top-ups and refunds
        </li>
        <li>
          <a href="/dashboard/activity">Activity</a>: spend per day, per tier and per key, every request
        </li>
      </ul>
    </Layout>
  );
}

function StatusNotice(props: { account: AccountRecord }) {
  if (props.account.status === 'active') return null;
  return (
    <p class="error" role="alert">
      This account is {props.account.status}: API requests are refused (403). Contact support.
    </p>
  );
}

export function KeysPage(props: {
  keys: KeyRecord[];
  created?: { name: string; key: string };
  error?: string;
  maxKeys: number;
  /**
   * Each active key's spend today (UTC), for its cap column (key-caps.tsx). Absent: per-key daily caps
   * are off, and the page has no cap column.
   */
  spent?: Map<string, bigint>;
}) {
  const keys = [...props.keys].sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  const { spent } = props;
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
      <form method="post" action="/dashboard/settings/api/keys" class="inline">
        <label for="key-name">New key name</label>
        <input id="key-name" name="name" required maxlength={128} />
        <button type="submit">Create key</button>
      </form>
      <p class="hint">At most {props.maxKeys} active keys per account.</p>
      <table>
        <caption>Your API keys</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Key</th>
            <th scope="col">Created</th>
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
              <td colspan={spent ? 6 : 5}>No keys yet.</td>
            </tr>
          ) : (
            keys.map((key) => (
              <tr>
                <td>{key.name}</td>
                <td>
                  <code>{key.displayPrefix}</code>
                </td>
                <td>{when(key.createdAt)}</td>
                <td>{status(key)}</td>
                {spent ? (
                  <td>
                    {key.status === 'active' ? <KeyCapCell keyRecord={key} spentNano={spentOf(key)} /> : null}
                  </td>
                ) : null}
                <td>
                  {key.status === 'active' ? (
                    <form method="post" action={`/dashboard/settings/api/keys/${key.keyId}/revoke`}>
                      <button type="submit" class="danger">
                        Revoke
                      </button>
                    </form>
                  ) : null}
                </td>
              </tr>
            ))
          )}
        </tbody>
      </table>
    </Layout>
  );
}

function History(props: { entries: LedgerEntry[] }) {
  return (
    <table>
      <caption>Top-ups and refunds</caption>
      <thead>
        <tr>
          <th scope="col">Date</th>
          <th scope="col">Type</th>
          <th scope="col">Reference</th>
          <th scope="col" class="num">
            Amount
          </th>
        </tr>
      </thead>
      <tbody>
        {props.entries.length === 0 ? (
          <tr>
            <td colspan={4}>Nothing yet.</td>
          </tr>
        ) : (
          props.entries.map((entry) => (
            <tr>
              <td>{when(entry.createdAt)}</td>
              <td>{entry.type === 'topup' ? 'Top-up' : 'Refund or correction'}</td>
              <td>
                <code>{entry.reference ?? entry.entryId}</code>
              </td>
              <td class="num">{usd(entry.deltaNano)}</td>
            </tr>
          ))
        )}
      </tbody>
    </table>
  );
}

/** Dollars for a form field: `12.5` as `12.50`, whole dollars bare. */
const dollarsField = (cents: number | undefined) =>
  cents === undefined ? '' : cents % 100 === 0 ? String(cents / 100) : (cents / 100).toFixed(2);
const centsUsd = (cents: number) => usd(BigInt(cents) * 10_000_000n);

/** The low-balance alert and auto top-up settings (functions/core/watch.ts), and why auto top-up is off. */
function BalanceWatchSettings(props: { watch?: Watch | undefined; error?: string | undefined }) {
  const watch = props.watch;
  const auto = watch?.autoTopUp;
  const card = auto?.paymentMethod
    ? `${auto.cardBrand ?? 'Card'} •••• ${auto.cardLast4 ?? '????'}`
    : undefined;
  return (
    <section id="balance-watch">
      <h2>Low-balance alert</h2>
      <form method="post" action="/dashboard/billing/alert" class="inline">
        <label for="threshold">E-mail me when the balance falls below (USD)</label>
        <input
          id="threshold"
          name="threshold"
          inputmode="decimal"
          value={dollarsField(watch?.thresholdCents)}
        />
        <button type="submit">Save</button>
      </form>
      <p class="hint">
        {watch?.thresholdCents !== undefined
          ? `One e-mail${watch.email ? ` to ${watch.email}` : ''} each time the balance falls below ${centsUsd(watch.thresholdCents)}. Leave it empty to turn the alert off.`
          : 'No alert set: from $1 to $10,000.'}
      </p>
      <h2>Auto top-up</h2>
      {props.error ? (
        <p class="error" role="alert">
          {props.error}
        </p>
      ) : null}
      {auto?.offReason ? (
        <p class="error" role="alert">
          Auto top-up was switched off {auto.offAt ? `on ${when(auto.offAt)} ` : ''}because the card was not
          charged: {auto.offReason}. Switch it on again, or save another card.
        </p>
      ) : null}
      <p>
        {card ? (
          <>
            Saved card: <strong class="card">{card}</strong>
          </>
        ) : (
          'No card saved yet: save one by buying credits with it once.'
        )}
      </p>
      <form method="post" action="/dashboard/billing/auto-top-up/card" class="inline">
        <label for="save-card-amount">Buy (USD) and save the card</label>
        <input
          id="save-card-amount"
          name="buy"
          inputmode="decimal"
          value={dollarsField(auto?.buyCents || 2_000)}
        />
        <button type="submit">{card ? 'Save another card' : 'Save a card'}</button>
      </form>
      <form method="post" action="/dashboard/billing/auto-top-up" class="inline">
        <label for="below">When below (USD)</label>
        <input
          id="below"
          name="below"
          inputmode="decimal"
          value={dollarsField(auto?.belowCents || undefined)}
        />
        <label for="buy">buy (USD)</label>
        <input id="buy" name="buy" inputmode="decimal" value={dollarsField(auto?.buyCents || undefined)} />
        <label>
          <input type="checkbox" name="enabled" value="on" checked={auto?.enabled === true} /> On
        </label>
        <button type="submit">Save</button>
      </form>
      <p class="hint">
        {auto?.enabled
          ? `On: when the balance falls below ${centsUsd(auto.belowCents)}, ${centsUsd(auto.buyCents)} is charged to the saved card, once per fall.`
          : 'Off.'}{' '}
        Below from $1 to $1,000; buy from $5 to $1,000.
      </p>
    </section>
  );
}

export function BillingPage(props: {
  account: AccountRecord;
  history: LedgerEntry[];
  fixedCents: readonly number[];
  error?: string;
  custom?: string;
  /** The balance watch's settings, where the dashboard has them. */
  watch?: Watch | undefined;
  watchEnabled?: boolean;
  watchError?: string;
}) {
  return (
    <Layout title="Billing" signedIn={true}>
      <StatusNotice account={props.account} />
      <p>
        Balance: <strong class="balance">{usd(props.account.balanceNano)}</strong>
      </p>
      <h2>Buy credits</h2>
      {props.error ? (
        <p class="error" role="alert">
          {props.error}
        </p>
      ) : null}
      <form method="post" action="/dashboard/billing/checkout" class="amounts">
        {props.fixedCents.map((cents) => (
          <button type="submit" name="amount" value={String(cents)}>
            {usd(BigInt(cents) * 10_000_000n).replace(/\.00$/, '')}
          </button>
        ))}
      </form>
      <form method="post" action="/dashboard/billing/checkout" class="inline">
        <label for="custom">Other amount (USD)</label>
        <input id="custom" name="custom" inputmode="decimal" value={props.custom ?? ''} />
        <button type="submit" name="amount" value="custom">
          Buy
        </button>
      </form>
      <p class="hint">Payments go through Stripe. Credits appear once Stripe confirms the payment.</p>
      {props.watchEnabled ? <BalanceWatchSettings watch={props.watch} error={props.watchError} /> : null}
      <History entries={props.history} />
    </Layout>
  );
}

export function SuccessPage(props: {
  account: AccountRecord;
  history: LedgerEntry[];
  /** The Checkout Session just paid is not in the ledger yet: the page says so, not a balance without it. */
  confirming?: { sessionId: string; amountCents?: number | undefined };
}) {
  const { confirming } = props;
  return (
    <Layout title="Thank you" signedIn={true}>
      {confirming ? (
        <p class="notice" role="status">
          Your payment
          {confirming.amountCents ? ` of ${usd(BigInt(confirming.amountCents) * 10_000_000n)}` : ''} is being
          confirmed: the credits are added as soon as Stripe confirms it, usually within seconds.{' '}
          <a href={`/dashboard/billing/success?session_id=${confirming.sessionId}`}>Refresh</a> to see them.
        </p>
      ) : (
        <>
          <p>Your payment was received. Credits are added once Stripe confirms a payment.</p>
          <p>
            Balance: <strong class="balance">{usd(props.account.balanceNano)}</strong>
          </p>
        </>
      )}
      <History entries={props.history.slice(0, 5)} />
      <p>
        <a href="/dashboard/billing">Back to billing</a>
      </p>
    </Layout>
  );
}
