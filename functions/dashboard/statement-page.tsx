/** @jsxImportSource hono/jsx */
/**
 * The monthly statement (billing/statement.ts) as the customer gets it: a printable page (the print
 * stylesheet drops the navigation and the links) and a CSV of the same numbers, each amount exact to
 * the nano-dollar. Key names are the customer's own text: the CSV neutralises any that would open as
 * a formula (shared/csv.ts).
 */

import { addMonths, NO_KEY, type Statement, type StatementLine } from '../billing/statement.js';
import { nanoToUsd } from '../core/money.js';
import type { KeyRecord } from '../core/store.js';
import { toCsv } from '../shared/csv.js';
import { BillingLinks } from './billing-profile.js';
import { Layout, usd, when } from './pages.js';

const STATEMENT_COLUMNS = ['section', 'time_utc', 'item', 'name', 'requests', 'amount_usd'] as const;

const LINE_SECTION: Record<StatementLine['kind'], string> = {
  topup: 'top_up',
  refund: 'refund',
  correction: 'correction',
};
const LINE_LABEL: Record<StatementLine['kind'], string> = {
  topup: 'Top-up',
  refund: 'Refund',
  correction: 'Correction',
};

const keyNames = (keys: readonly KeyRecord[]) => new Map(keys.map((key) => [key.keyId, key.name]));

/**
 * The statement as CSV: the opening balance, each top-up, refund and correction, usage by key and
 * by tier, the month's totals and the closing balance. Balances are signed; every other amount is
 * what it added or took, positive.
 */
export function statementCsv(statement: Statement, keys: readonly KeyRecord[]): string {
  const names = keyNames(keys);
  const row = (section: string, amount: bigint, fields: Record<string, unknown> = {}) => ({
    section,
    amount_usd: nanoToUsd(amount),
    ...fields,
  });
  return `${toCsv(STATEMENT_COLUMNS, [
    row('opening_balance', statement.openingNano, { time_utc: statement.from }),
    ...statement.lines.map((line) =>
      row(LINE_SECTION[line.kind], line.amountNano, { time_utc: line.createdAt, item: line.reference }),
    ),
    ...statement.byKey.map((key) =>
      row('usage_by_key', key.amountNano, {
        item: key.name,
        name: names.get(key.name) ?? '',
        requests: key.requests,
      }),
    ),
    ...statement.byTier.map((tier) =>
      row('usage_by_tier', tier.amountNano, { item: tier.name, requests: tier.requests }),
    ),
    row('total_top_ups', statement.topUpsNano),
    row('total_refunds', statement.refundsNano),
    row('total_corrections', statement.correctionsNano),
    row('total_usage', statement.usageNano, { requests: statement.requests }),
    row('closing_balance', statement.closingNano, { time_utc: statement.to }),
  ])}\n`;
}

function Totals(props: { statement: Statement }) {
  const s = props.statement;
  const rows: [string, string][] = [
    [`Opening balance (${when(s.from)})`, usd(s.openingNano)],
    ['+ Top-ups', usd(s.topUpsNano)],
    ['− Refunds', usd(s.refundsNano)],
    ['− Corrections', usd(s.correctionsNano)],
    [`− Usage (${s.requests} requests)`, usd(s.usageNano)],
    [`Closing balance (${when(s.to)})`, usd(s.closingNano)],
  ];
  return (
    <table class="statement-totals">
      <caption>Summary</caption>
      <tbody>
        {rows.map(([label, amount], i) => (
          <tr class={i === rows.length - 1 ? 'total' : undefined}>
            <th scope="row">{label}</th>
            <td class="num">{amount}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function Usage(props: { caption: string; rows: Statement['byKey']; label: (name: string) => string }) {
  return (
    <table>
      <caption>{props.caption}</caption>
      <thead>
        <tr>
          <th scope="col">{props.caption.replace('Usage by ', '').replace(/^./, (c) => c.toUpperCase())}</th>
          <th scope="col" class="num">
            Requests
          </th>
          <th scope="col" class="num">
            Amount
          </th>
        </tr>
      </thead>
      <tbody>
        {props.rows.length === 0 ? (
          <tr>
            <td colspan={3}>No usage.</td>
          </tr>
        ) : (
          props.rows.map((row) => (
            <tr>
              <td class="wrap">{props.label(row.name)}</td>
              <td class="num">{row.requests}</td>
              <td class="num">{usd(row.amountNano)}</td>
            </tr>
          ))
        )}
      </tbody>
    </table>
  );
}

export function StatementPage(props: { statement: Statement; keys: readonly KeyRecord[]; current: string }) {
  const s = props.statement;
  const names = keyNames(props.keys);
  const previous = addMonths(s.month, -1);
  const next = addMonths(s.month, 1);
  return (
    <Layout title={`Statement ${s.month}`} signedIn={true}>
      <BillingLinks month={props.current} />
      <p class="no-print">
        <a href={`/dashboard/billing/statement/${previous}`}>← {previous}</a>
        {s.month < props.current ? (
          <>
            {' · '}
            <a href={`/dashboard/billing/statement/${next}`}>{next} →</a>
          </>
        ) : null}
        {' · '}
        <a href={`/dashboard/billing/statement/${s.month}.csv`} download={`statement-${s.month}.csv`}>
          Download CSV
        </a>
      </p>
      <p class="hint">
        UTC month from {when(s.from)} to {when(s.to)}, from the ledger, exact to the nano-dollar.
        {s.month === props.current ? ' The month is not over: its closing balance is the balance now.' : ''}
      </p>
      <Totals statement={s} />
      <table>
        <caption>Top-ups, refunds and corrections</caption>
        <thead>
          <tr>
            <th scope="col">Date</th>
            <th scope="col">Type</th>
            <th scope="col" class="num">
              Amount
            </th>
          </tr>
        </thead>
        <tbody>
          {s.lines.length === 0 ? (
            <tr>
              <td colspan={3}>None this month.</td>
            </tr>
          ) : (
            s.lines.map((line) => (
              <tr>
                <td>{when(line.createdAt)}</td>
                <td class="wrap">
                  {LINE_LABEL[line.kind]} <code>{line.reference}</code>
                </td>
                <td class="num">{usd(line.kind === 'topup' ? line.amountNano : -line.amountNano)}</td>
              </tr>
            ))
          )}
        </tbody>
      </table>
      <Usage
        caption="Usage by key"
        rows={s.byKey}
        label={(id) => (id === NO_KEY ? '(no key)' : `${names.get(id) ?? 'Deleted key'} (${id})`)}
      />
      <Usage caption="Usage by tier" rows={s.byTier} label={(tier) => (tier === NO_KEY ? '(none)' : tier)} />
    </Layout>
  );
}
