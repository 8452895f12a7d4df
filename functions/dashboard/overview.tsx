/** @jsxImportSource hono/jsx */
/**
 * The Overview a signed-in customer lands on: the balance, what was spent this month (UTC) and in the
 * last 30 days with its trend, and a quick start: the API's base URL, the prefix of the newest active
 * key (never a key's text: only its creation shows that, once), and a copyable curl command and SDK
 * snippets. Three reads at once: the account, its spend per day, its keys.
 */
import type { AccountRecord, DaySpend, KeyRecord, Store } from '../core/store.js';
import { utcDay } from '../core/store.js';
import { dayTotal, SpendChart, tiersOf } from './chart.js';
import { Layout, StatusNotice, usd } from './pages.js';

/** Enough days for this month (at most 31) and the trend's 30. */
const DAYS_READ = 31;
const TREND_DAYS = 30;

export interface Overview {
  account: AccountRecord;
  days: DaySpend[];
  keys: KeyRecord[];
  today: string;
  /** The API's base URL, as a client's `base_url` takes it. */
  baseUrl: string;
}

/** The Overview's reads, all at once; undefined for an account that is not there. */
export async function readOverview(
  store: Store,
  accountId: string,
  now: Date,
  publicOrigin: string,
): Promise<Overview | undefined> {
  const today = utcDay(now.toISOString());
  const [account, days, keys] = await Promise.all([
    store.getAccount(accountId),
    store.dailySpend(accountId, { today, days: DAYS_READ }),
    store.listKeys(accountId),
  ]);
  return account ? { account, days, keys, today, baseUrl: `${publicOrigin}/api/v1` } : undefined;
}

function Snippet(props: { id: string; title: string; text: string }) {
  return (
    <div class="snippet">
      <div class="snippet-head">
        <span>{props.title}</span>
        <button type="button" class="secondary" data-copy={props.id}>
          Copy
        </button>
      </div>
      <pre id={props.id}>{props.text}</pre>
    </div>
  );
}

export function OverviewPage(props: { overview: Overview }) {
  const { account, days, keys, today, baseUrl } = props.overview;
  const month = today.slice(0, 7);
  const thisMonth = days.filter((d) => d.day.startsWith(month)).reduce((s, d) => s + dayTotal(d), 0n);
  const trend = days.slice(-TREND_DAYS);
  const last30 = trend.reduce((s, d) => s + dayTotal(d), 0n);
  const active = keys.filter((k) => k.status === 'active');
  const newest = active.reduce<KeyRecord | undefined>(
    (n, k) => (n === undefined || k.createdAt > n.createdAt ? k : n),
    undefined,
  );
  const keyHint = newest ? `${newest.displayPrefix} (${newest.name})` : undefined;
  const curl = [
    `curl ${baseUrl}/chat/completions \\`,
    '  -H "Authorization: Bearer $SVC_API_KEY" \\',
    '  -H "Content-Type: application/json" \\',
    `  -d '{"model": "svc-fast", "messages": [{"role": "user", "content": "Hello"}]}'`,
  ].join('\n');
  const python = [
    'from openai import OpenAI',
    'import os',
    '',
    `client = OpenAI(base_url="${baseUrl}", api_key=os.environ["SVC_API_KEY"])`,
    'reply = client.chat.completions.create(',
    '    model="svc-fast", messages=[{"role": "user", "content": "Hello"}]',
    ')',
    'print(reply.choices[0].message.content)',
  ].join('\n');
  return (
    <Layout title="Overview" signedIn={true}>
      <StatusNotice account={account} />
      <section class="cards" aria-label="Summary">
        <div class="card">
          <h2>Balance</h2>
          <p class="figure balance" data-figure="balance">
            {usd(account.balanceNano)}
          </p>
          <a href="/dashboard/billing">Buy credits</a>
        </div>
        <div class="card">
          <h2>Spent in {month} (UTC)</h2>
          <p class="figure" data-figure="month">
            {usd(thisMonth)}
          </p>
          <a href="/dashboard/activity">Activity</a>
        </div>
        <div class="card">
          <h2>Last 30 days</h2>
          <p class="figure" data-figure="30d">
            {usd(last30)}
          </p>
          <span class="hint">
            {active.length} active {active.length === 1 ? 'key' : 'keys'}
          </span>
        </div>
      </section>
      <h2>Spend, last 30 days</h2>
      <SpendChart days={trend} tiers={tiersOf(trend)} compact={true} />
      <h2>Quick start</h2>
      <p>
        Base URL: <code id="base-url">{baseUrl}</code>{' '}
        <button type="button" class="secondary" data-copy="base-url">
          Copy
        </button>
      </p>
      <p>
        {keyHint ? (
          <>
            Your newest key: <code>{keyHint}</code>. A key is shown in full only when it is created; set it as{' '}
            <code>SVC_API_KEY</code>.
          </>
        ) : (
          <>
            You have no active key yet: <a href="/dashboard/settings/api">create one</a>, then set it as{' '}
            <code>SVC_API_KEY</code>.
          </>
        )}
      </p>
      <Snippet id="snippet-curl" title="curl" text={curl} />
      <Snippet id="snippet-python" title="Python (openai)" text={python} />
    </Layout>
  );
}
