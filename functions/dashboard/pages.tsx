/** @jsxImportSource hono/jsx */
/**
 * The dashboard's pages, rendered on the server with hono/jsx (every value is escaped as text: a key
 * named `<script>` shows as those characters). No inline script or style anywhere: the CSP forbids
 * both (app.tsx); the stylesheet and the copy button's script are files the function serves.
 */
import type { Child } from 'hono/jsx';
import { formatDecimal } from '../core/money.js';
import type { AccountRecord } from '../core/store.js';

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
            Hosted model API
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

/** The signed-out front page (a signed-in customer's is the Overview, overview.tsx). */
export function WelcomePage() {
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
}

export function StatusNotice(props: { account: AccountRecord }) {
  if (props.account.status === 'active') return null;
  return (
    <p class="error" role="alert">
      This account is {props.account.status}: API requests are refused (403). Contact support.
    </p>
  );
}
