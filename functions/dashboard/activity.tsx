/** @jsxImportSource hono/jsx */
/**
 * Activity: spend per UTC day by tier over the last 30 days (a bar chart drawn on the server as SVG,
 * with a table of the same numbers for screen readers), totals per tier and per key, and the
 * account's requests a page at a time, exported as CSV row for row. One day everywhere: the UTC date
 * of the charge's createdAt (core/store.ts utcDay), as the daily totals count it and the list and
 * the CSV print it. No inline script or style: the bars' colours are SVG presentation attributes.
 */
import { stringify } from 'csv-stringify/sync';
import { nanoToUsd } from '../core/money.js';
import type { DaySpend, KeyRecord, LedgerEntry } from '../core/store.js';
import { dayTotal, SpendChart, tiersOf } from './chart.js';
import { Layout, usd, when } from './pages.js';

export const ACTIVITY_DAYS = 30;
export const ACTIVITY_PAGE = 50;

const cost = (entry: LedgerEntry) => -entry.deltaNano;

/** The rows the list shows and the CSV exports, in the same order: one place decides both. */
export function csvOf(charges: LedgerEntry[], keys: KeyRecord[]): string {
  const names = new Map(keys.map((k) => [k.keyId, k.name]));
  return stringify(
    charges.map((c) => [
      c.createdAt,
      c.entryId,
      c.keyId ?? '',
      names.get(c.keyId ?? '') ?? '',
      c.tier ?? '',
      c.promptTokens ?? 0,
      c.completionTokens ?? 0,
      c.cachedTokens ?? 0,
      nanoToUsd(cost(c)),
    ]),
    {
      header: true,
      columns: [
        'time_utc',
        'generation_id',
        'key_id',
        'key_name',
        'tier',
        'prompt_tokens',
        'completion_tokens',
        'cached_tokens',
        'cost_usd',
      ],
    },
  );
}

export function ActivityPage(props: {
  days: DaySpend[];
  keys: KeyRecord[];
  keyUsage: Map<string, bigint>;
  charges: LedgerEntry[];
  after?: string;
  next?: string;
}) {
  const tiers = tiersOf(props.days);
  const tierTotal = (tier: string) => props.days.reduce((sum, d) => sum + (d.byTier[tier] ?? 0n), 0n);
  const total = props.days.reduce((sum, d) => sum + dayTotal(d), 0n);
  // The table lists the days with spend only (a day of $0.00 says nothing the chart does not).
  const spendDays = props.days.filter((d) => dayTotal(d) > 0n);
  const names = new Map(props.keys.map((k) => [k.keyId, k.name]));
  const listed = props.charges.reduce((sum, c) => sum + cost(c), 0n);
  const query = props.after ? `?after=${encodeURIComponent(props.after)}` : '';
  return (
    <Layout title="Activity" signedIn={true}>
      <p class="hint">Days are UTC days, here, in the totals and in the export.</p>
      <h2>Spend per day, last {props.days.length} days</h2>
      <SpendChart days={props.days} tiers={tiers} />
      <table class="spend-by-day">
        <caption>Spend per UTC day by tier (days with spend)</caption>
        <thead>
          <tr>
            <th scope="col">Day (UTC)</th>
            {tiers.map((tier) => (
              <th scope="col" class="num">
                {tier}
              </th>
            ))}
            <th scope="col" class="num">
              Total
            </th>
          </tr>
        </thead>
        <tbody>
          {spendDays.length === 0 ? (
            <tr>
              <td colspan={tiers.length + 2}>No spend in these {props.days.length} days.</td>
            </tr>
          ) : null}
          {spendDays.map((day) => (
            <tr>
              <th scope="row">{day.day}</th>
              {tiers.map((tier) => (
                <td class="num">{usd(day.byTier[tier] ?? 0n)}</td>
              ))}
              <td class="num">{usd(dayTotal(day))}</td>
            </tr>
          ))}
        </tbody>
        <tfoot>
          <tr>
            <th scope="row">Total</th>
            {tiers.map((tier) => (
              <td class="num" data-tier-total={tier}>
                {usd(tierTotal(tier))}
              </td>
            ))}
            <td class="num" data-total="30d">
              {usd(total)}
            </td>
          </tr>
        </tfoot>
      </table>
      <table>
        <caption>Spent per key (every charge since per-key totals were kept)</caption>
        <thead>
          <tr>
            <th scope="col">Key</th>
            <th scope="col">Prefix</th>
            <th scope="col" class="num">
              Spent
            </th>
          </tr>
        </thead>
        <tbody>
          {props.keys.map((key) => (
            <tr>
              <td>{key.name}</td>
              <td>
                <code>{key.displayPrefix}</code>
              </td>
              <td class="num">{usd(props.keyUsage.get(key.keyId) ?? 0n)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>Requests</h2>
      <p>
        <a href={`/dashboard/activity.csv${query}`} download="activity.csv">
          Download these rows (CSV)
        </a>
      </p>
      <table>
        <caption>Requests, newest first ({props.charges.length} on this page)</caption>
        <thead>
          <tr>
            <th scope="col">Time</th>
            <th scope="col">Generation</th>
            <th scope="col">Key</th>
            <th scope="col">Tier</th>
            <th scope="col" class="num">
              Tokens (in / out)
            </th>
            <th scope="col" class="num">
              Cost
            </th>
          </tr>
        </thead>
        <tbody>
          {props.charges.length === 0 ? (
            <tr>
              <td colspan={6}>No requests.</td>
            </tr>
          ) : (
            props.charges.map((c) => (
              <tr>
                <td>{when(c.createdAt)}</td>
                <td>
                  <code>{c.entryId}</code>
                </td>
                <td>{names.get(c.keyId ?? '') ?? c.keyId ?? ''}</td>
                <td>{c.tier ?? ''}</td>
                <td class="num">{`${c.promptTokens ?? 0} / ${c.completionTokens ?? 0}`}</td>
                <td class="num">{usd(cost(c))}</td>
              </tr>
            ))
          )}
        </tbody>
        <tfoot>
          <tr>
            <th scope="row" colspan={5}>
              Total of the rows listed
            </th>
            <td class="num" data-total="listed">
              {usd(listed)}
            </td>
          </tr>
        </tfoot>
      </table>
      <p>
        {props.after ? <a href="/dashboard/activity">Newest</a> : null}{' '}
        {props.next ? (
          <a href={`/dashboard/activity?after=${encodeURIComponent(props.next)}`}>Older requests</a>
        ) : null}
      </p>
    </Layout>
  );
}
