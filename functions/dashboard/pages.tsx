/** @jsxImportSource hono/jsx */
/**
 * The dashboard's pages, rendered on the server with hono/jsx (every value is escaped as text: a key
 * named `<script>` shows as those characters). No inline script or style anywhere: the CSP forbids
 * both (app.tsx); the stylesheet and the copy button's script are files the function serves.
 */
import { tryGetContext } from 'hono/context-storage';
import type { Child } from 'hono/jsx';
import { formatDecimal } from '../core/money.js';
import type { AccountRecord } from '../core/store.js';
import { can, type Member, type Permission } from '../core/team.js';
import type { DashboardEnv } from './deps.js';

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

/**
 * The signed-in member of the request being rendered (its role and other accounts), from the request's
 * context (app.tsx keeps it: hono's contextStorage); undefined on a signed-out page.
 */
function viewer(): { member?: Member; memberships?: Member[] } {
  return tryGetContext<DashboardEnv>()?.var ?? {};
}

/** Whether the signed-in member's role may do this: what a page offers (the server checks it anyway). */
export function allowed(permission: Permission): boolean {
  const { member } = viewer();
  return member !== undefined && can(member.role, permission);
}

/** An account as its members see it named (accounts have no name of their own): its id's first characters. */
const accountLabel = (accountId: string) => accountId.replace(/^acct-/, '').slice(0, 8);

/** The header's account switcher: shown to a person who belongs to more than one account. */
function AccountSwitcher() {
  const { member, memberships = [] } = viewer();
  if (!member || memberships.length < 2) return null;
  return (
    <form method="post" action="/dashboard/switch-account" class="switcher">
      <label for="switch-account" class="visually-hidden">
        Account
      </label>
      <select id="switch-account" name="accountId">
        {memberships.map((m) => (
          <option value={m.accountId} selected={m.accountId === member.accountId}>
            {`Account ${accountLabel(m.accountId)} (${m.role})`}
          </option>
        ))}
      </select>
      <button type="submit">Switch</button>
    </form>
  );
}

/** Who is signed in, and as what on this account: the header's last words before "Sign out". */
function SignedInAs() {
  const { member } = viewer();
  if (!member) return null;
  return (
    <span class="who" data-signed-in={member.email}>
      {member.email} <span class="hint">({member.role})</span>
    </span>
  );
}

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
              <a href="/dashboard/settings/members">Members</a>
              {allowed('members') ? <a href="/dashboard/settings/audit">Audit log</a> : null}
              <AccountSwitcher />
              <SignedInAs />
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

/**
 * A destructive action behind a second, explicit click, with no script: the first click opens the
 * question (a `<details>` disclosure, keyboard and screen-reader friendly), the second posts the form.
 * `children` are the form's hidden inputs.
 */
export function ConfirmAction(props: {
  action: string;
  label: string;
  /** What will happen, said in full ("Revoke the key "ci"? Requests with it are refused at once."). */
  question: string;
  /** The confirming button's text ("Yes, revoke it"). */
  confirm: string;
  /** The disclosure's accessible name, when `label` alone is ambiguous in a list ("Remove ana@example.com"). */
  name?: string;
  children?: Child;
}) {
  return (
    <details class="confirm">
      <summary class="danger" {...(props.name ? { 'aria-label': props.name } : {})}>
        {props.label}
      </summary>
      <form method="post" action={props.action}>
        {props.children}
        <p>{props.question}</p>
        <button type="submit" class="danger">
          {props.confirm}
        </button>
      </form>
    </details>
  );
}
