/** @jsxImportSource hono/jsx */
/**
 * Spend per UTC day by tier as a stacked bar chart, drawn on the server as SVG with its axes: amounts
 * on the left (0, half and the top of the scale, with grid lines), days along the bottom (the last
 * day and every seventh before it). No inline
 * style (the CSP forbids it): colours and sizes are SVG presentation attributes. Each bar is titled
 * with its day, tier and exact amount; a table beside it carries the same numbers for screen readers.
 */
import { formatDecimal } from '../core/money.js';
import type { DaySpend } from '../core/store.js';
import { usd } from './pages.js';

/** The tiers in a stable order (the product's three first), and each one's bar colour. */
const COLOURS = ['#2563eb', '#16a34a', '#d97706', '#9333ea', '#dc2626', '#0891b2'];
const KNOWN = ['svc-fast', 'svc-pro', 'svc-heavy'];

export function tiersOf(days: DaySpend[]): string[] {
  const seen = new Set(days.flatMap((d) => Object.keys(d.byTier)));
  return [...KNOWN.filter((t) => seen.has(t)), ...[...seen].filter((t) => !KNOWN.includes(t)).sort()];
}

export const dayTotal = (day: DaySpend): bigint => Object.values(day.byTier).reduce((a, b) => a + b, 0n);

/**
 * The top of the axis: the smallest "nice" amount (1, 2 or 5 times a power of ten, in nano-USD) at or
 * above the largest day, so the labels read $0.05, not $0.0437. Exact: bigint throughout.
 */
function axisTop(max: bigint): bigint {
  if (max <= 0n) return 0n;
  let step = 1n;
  for (;;) {
    for (const m of [1n, 2n, 5n]) if (step * m >= max) return step * m;
    step *= 10n;
  }
}

/** An axis label: `$0.05`, `$2.00`, whole dollars from $1,000; exact amounts are in the bars' titles and the table. */
const axisLabel = (nano: bigint): string =>
  nano >= 1_000_000_000_000n ? `$${formatDecimal(nano / 1_000_000_000n, 0)}` : usd(nano);

export function SpendChart(props: { days: DaySpend[]; tiers: string[]; compact?: boolean }) {
  const width = 720;
  const height = props.compact ? 160 : 240;
  const left = 64;
  const bottom = 22;
  const top = 10;
  const plot = height - bottom - top;
  const bar = (width - left) / Math.max(props.days.length, 1);
  // biome-ignore lint/complexity/useMathMinMax: bigints (Math.max takes numbers)
  const max = props.days.reduce((m, d) => (dayTotal(d) > m ? dayTotal(d) : m), 0n);
  const topAmount = axisTop(max);
  const scale = (nano: bigint) => (topAmount === 0n ? 0 : (Number(nano) / Number(topAmount)) * plot);
  const ticks = topAmount === 0n ? [0n] : [0n, topAmount / 2n, topAmount];
  const label = props.days.length
    ? `Spend per UTC day by tier, ${props.days[0]?.day} to ${props.days.at(-1)?.day}; the table has the numbers`
    : 'No days';
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${width} ${height}`} width="100%" role="img" aria-label={label}>
        {ticks.map((tick) => {
          const y = height - bottom - scale(tick);
          return (
            <g>
              <line x1={left} x2={width} y1={y} y2={y} stroke="#8884" stroke-width="1" />
              <text x={left - 6} y={y + 4} font-size="11" text-anchor="end" fill="currentColor">
                {axisLabel(tick)}
              </text>
            </g>
          );
        })}
        {props.days.map((day, i) => {
          let y = height - bottom;
          return (
            <g>
              {props.tiers.map((tier, t) => {
                const h = scale(day.byTier[tier] ?? 0n);
                y -= h;
                return h > 0 ? (
                  <rect
                    x={left + i * bar + 1.5}
                    y={y}
                    width={Math.max(bar - 3, 1)}
                    height={h}
                    fill={COLOURS[t % COLOURS.length]}
                  >
                    <title>{`${day.day} ${tier}: ${usd(day.byTier[tier] ?? 0n)}`}</title>
                  </rect>
                ) : null;
              })}
              {(props.days.length - 1 - i) % 7 === 0 ? (
                <text
                  x={left + i * bar + bar / 2}
                  y={height - 6}
                  font-size="11"
                  text-anchor="middle"
                  fill="currentColor"
                >
                  {day.day.slice(5)}
                </text>
              ) : null}
            </g>
          );
        })}
        <line
          x1={left}
          x2={width}
          y1={height - bottom}
          y2={height - bottom}
          stroke="currentColor"
          stroke-width="1"
        />
      </svg>
      <figcaption>
        {props.tiers.length === 0 ? <span class="hint">No spend in these days.</span> : null}
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
