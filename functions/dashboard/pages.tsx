/** @jsxImportSource hono/jsx */
/**
 * The dashboard's pages, rendered on the server with hono/jsx (every value is escaped as text: a key
 * named `<script>` shows as those characters). No inline script or style anywhere: the CSP forbids
 * both (app.tsx); the stylesheet and the copy button's script are files the function serves.
 */
import type { Child } from 'hono/jsx';
import { formatDecimal } from '../core/money.js';
import type { AccountRecord, KeyRecord } from '../core/store.js';
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

export function StatusNotice(props: { account: AccountRecord }) {
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
