/** @jsxImportSource hono/jsx */
/**
 * Billing's pages (server-rendered as pages.tsx's are, with its Layout): the balance, the credit
 * history, the low-balance alert and auto top-up settings, and the thank-you page after Checkout.
 */
import type { AccountRecord, LedgerEntry } from '../core/store.js';
import type { Watch } from '../core/watch.js';
import { BillingLinks } from './billing-profile.js';
import { allowed, Layout, StatusNotice, usd, when } from './pages.js';

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
function BalanceWatchSettings(props: {
  watch?: Watch | undefined;
  error?: string | undefined;
  /** The role may change them (owner, billing): else the settings are shown without their forms. */
  manage: boolean;
}) {
  const watch = props.watch;
  const auto = watch?.autoTopUp;
  const card = auto?.paymentMethod
    ? `${auto.cardBrand ?? 'Card'} •••• ${auto.cardLast4 ?? '????'}`
    : undefined;
  return (
    <section id="balance-watch">
      <h2>Low-balance alert</h2>
      {props.manage ? (
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
      ) : null}
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
      {props.manage ? (
        <>
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
            <input
              id="buy"
              name="buy"
              inputmode="decimal"
              value={dollarsField(auto?.buyCents || undefined)}
            />
            <label>
              <input type="checkbox" name="enabled" value="on" checked={auto?.enabled === true} /> On
            </label>
            <button type="submit">Save</button>
          </form>
        </>
      ) : null}
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
  // Buying and changing alerts or auto top-up: owners and billing members (the server checks it too).
  const manage = allowed('billing');
  return (
    <Layout title="Billing" signedIn={true}>
      <StatusNotice account={props.account} />
      <p>
        Balance: <strong class="balance">{usd(props.account.balanceNano)}</strong>
      </p>
      <BillingLinks />
      <h2>Buy credits</h2>
      {props.error ? (
        <p class="error" role="alert">
          {props.error}
        </p>
      ) : null}
      {manage ? (
        <>
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
        </>
      ) : (
        <p class="hint">
          Your role can see billing; owners and billing members buy credits and set alerts and auto top-up.
        </p>
      )}
      <p class="hint">Payments go through Stripe. Credits appear once Stripe confirms the payment.</p>
      {props.watchEnabled ? (
        <BalanceWatchSettings watch={props.watch} error={props.watchError} manage={manage} />
      ) : null}
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
