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
import { Layout, usd, when } from './pages.js';

export const ACTIVITY_DAYS = 30;
export const ACTIVITY_PAGE = 50;

/** The tiers in a stable order (the product's three first), and each one's bar colour. */
const COLOURS = ['#2563eb', '#16a34a', '#d97706', '#9333ea', '#dc2626', '#0891b2'];
const KNOWN = ['svc-fast', 'svc-pro', 'svc-heavy'];
function tiersOf(days: DaySpend[]): string[] {
  const seen = new Set(days.flatMap((d) => Object.keys(d.byTier)));
  return [...KNOWN.filter((t) => seen.has(t)), ...[...seen].filter((t) => !KNOWN.includes(t)).sort()];
}

const dayTotal = (day: DaySpend) => Object.values(day.byTier).reduce((a, b) => a + b, 0n);
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

function Chart(props: { days: DaySpend[]; tiers: string[] }) {
  const width = 720;
  const height = 220;
  const bar = width / props.days.length;
  // biome-ignore lint/complexity/useMathMinMax: bigints (Math.max takes numbers)
  const max = props.days.reduce((m, d) => (dayTotal(d) > m ? dayTotal(d) : m), 0n);
  const scale = (nano: bigint) => (max === 0n ? 0 : (Number(nano) / Number(max)) * (height - 30));
  return (
    <figure>
      <svg
        viewBox={`0 0 ${width} ${height}`}
        width="100%"
        role="img"
        aria-label={`Spend per UTC day by tier, the last ${props.days.length} days; the table below has the numbers`}
      >
        {props.days.map((day, i) => {
          let y = height - 20;
          return (
            <g>
              {props.tiers.map((tier, t) => {
                const h = scale(day.byTier[tier] ?? 0n);
                y -= h;
                return h > 0 ? (
                  <rect x={i * bar + 2} y={y} width={bar - 4} height={h} fill={COLOURS[t % COLOURS.length]}>
                    <title>{`${day.day} ${tier}: ${usd(day.byTier[tier] ?? 0n)}`}</title>
                  </rect>
                ) : null;
              })}
              {i % 5 === 4 || i === props.days.length - 1 ? (
                <text x={i * bar + bar / 2} y={height - 4} font-size="10" text-anchor="middle" fill="#555">
                  {day.day.slice(5)}
                </text>
              ) : null}
            </g>
          );
        })}
        <text x="4" y="12" font-size="11" fill="#555">{`max ${usd(max)} a day`}</text>
      </svg>
      <figcaption>
        {props.tiers.map((tier, t) => (
          <span class="legend">
            <svg viewBox="0 0 10 10" width="10" height="10" aria-hidden="true">
              <rect width="10" height="10" fill={COLOURS[t % COLOURS.length]} />
            </svg>{' '}
            {tier}{' '}
          </span>
        ))}
      </figcaption>
    </figure>
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
  const names = new Map(props.keys.map((k) => [k.keyId, k.name]));
  const listed = props.charges.reduce((sum, c) => sum + cost(c), 0n);
  const query = props.after ? `?after=${encodeURIComponent(props.after)}` : '';
  return (
    <Layout title="Activity" signedIn={true}>
      <p class="hint">Days are UTC days, here, in the totals and in the export.</p>
      <h2>Spend per day, last {props.days.length} days</h2>
      <Chart days={props.days} tiers={tiers} />
      <table class="spend-by-day">
        <caption>Spend per UTC day by tier</caption>
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
          {props.days.map((day) => (
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
