/**
 * Activity: the chart's table, the totals, the list and its CSV, in process over the memory store
 * (whose daily totals are the ledger's own sums: the DynamoDB adapter's are held to them in
 * test/integration/activity-store.test.ts).
 */
import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { newGenerationId } from '../../../functions/core/ids.js';
import { usdToNano } from '../../../functions/core/money.js';
import { chargeEntry } from '../../support/fixtures.js';
import { accountOf, dashboard } from './support.js';

async function signedIn() {
  const d = dashboard();
  const b = d.browser();
  await d.signIn(b, 'user-1');
  const accountId = accountOf(d.store, 'user-1');
  await d.post(b, '/dashboard/settings/api/keys', { name: 'prod' });
  const keyId = (await d.store.listKeys(accountId))[0]?.keyId as string;
  return { ...d, b, accountId, keyId };
}

const charge = (accountId: string, keyId: string, nano: bigint, createdAt: string, tier = 'svc-fast') =>
  chargeEntry(accountId, keyId, nano, {
    generationId: newGenerationId(Date.parse(createdAt), 0),
    createdAt,
    tier,
  });

const cell = (page: string, attribute: string) =>
  new RegExp(`data-${attribute}[^>]*>([^<]*)<`).exec(page)?.[1];

describe('Activity', () => {
  it("shows the page's totals equal to the sum of the CSV's rows and of the ledger", async () => {
    const { b, get, store, accountId, keyId } = await signedIn();
    const costs = [1n, 999_999_999n, 123_456_789n, 7n];
    for (const [i, nano] of costs.entries())
      await store.settleCharge(
        charge(accountId, keyId, nano, `2025-05-3${i % 2}T10:00:0${i}Z`, i % 2 ? 'svc-pro' : 'svc-fast'),
      );
    const page = (await get(b, '/dashboard/activity')).body;
    const csv = await get(b, '/dashboard/activity.csv');
    expect(csv.response.headers.get('content-type')).toContain('text/csv');
    const rows = parse(csv.body, { columns: true }) as Record<string, string>[];
    expect(rows).toHaveLength(costs.length);
    const csvSum = rows.reduce((sum, row) => sum + usdToNano(row.cost_usd as string), 0n);
    expect(csvSum).toBe(1_123_456_796n);
    expect(cell(page, 'total="listed"')).toBe('$1.123456796');
    expect(cell(page, 'total="30d"')).toBe('$1.123456796');
    expect(cell(page, 'tier-total="svc-pro"')).toBe('$1.000000006');
    for (const row of rows) expect(page).toContain(row.generation_id);
    expect(rows[0]?.key_name).toBe('prod');
  });

  it('puts a charge in the UTC day of its time, the same in the chart table and the CSV (injected clock)', async () => {
    const { b, get, store, clock, accountId, keyId } = await signedIn();
    clock.now = new Date('2025-06-01T00:00:00.500Z');
    await store.settleCharge(charge(accountId, keyId, 5n, '2025-05-31T23:59:59.999Z'));
    await store.settleCharge(charge(accountId, keyId, 7n, '2025-06-01T00:00:00.000Z'));
    // Thirty days back from today's: 2025-05-03, the first row; 2025-05-02 is out of the chart.
    await store.settleCharge(charge(accountId, keyId, 11n, '2025-05-02T23:59:59.999Z'));
    const page = (await get(b, '/dashboard/activity')).body;
    const row = (day: string) =>
      new RegExp(`<th scope="row">${day}</th><td class="num">([^<]*)<`).exec(page)?.[1];
    expect(row('2025-05-31')).toBe('$0.000000005');
    expect(row('2025-06-01')).toBe('$0.000000007');
    // A day without spend is in the chart, not in its table (30 rows of $0.00 said nothing).
    expect(row('2025-05-03')).toBeUndefined();
    expect(page).toContain('2025-05-03 to 2025-06-01');
    expect(page).not.toContain('<th scope="row">2025-05-02</th>');
    expect(cell(page, 'total="30d"')).toBe('$0.000000012');
    const rows = parse((await get(b, '/dashboard/activity.csv')).body, { columns: true }) as Record<
      string,
      string
    >[];
    expect(rows.map((r) => r.time_utc)).toEqual([
      '2025-06-01T00:00:00.000Z',
      '2025-05-31T23:59:59.999Z',
      '2025-05-02T23:59:59.999Z',
    ]);
  });

  it("never shows another account's requests or spend", async () => {
    const d = await signedIn();
    const other = d.browser();
    await d.signIn(other, 'user-2');
    const otherId = accountOf(d.store, 'user-2');
    const theirs = charge(otherId, 'key_other', 424_242n, '2025-06-01T11:00:00Z');
    await d.store.settleCharge(theirs);
    const page = (await d.get(d.b, '/dashboard/activity')).body;
    const csv = (await d.get(d.b, '/dashboard/activity.csv')).body;
    expect(page).not.toContain(theirs.generationId);
    expect(csv).not.toContain(theirs.generationId);
    expect(cell(page, 'total="30d"')).toBe('$0.00');
    expect((await d.get(other, '/dashboard/activity')).body).toContain(theirs.generationId);
  });

  it('pages the list by 50, the CSV exporting exactly the rows of the page', async () => {
    const { b, get, store, accountId, keyId } = await signedIn();
    for (let i = 0; i < 60; i++)
      await store.settleCharge(
        charge(accountId, keyId, 1n, new Date(Date.parse('2025-05-31T00:00:00Z') + i * 1000).toISOString()),
      );
    const first = (await get(b, '/dashboard/activity')).body;
    const next = /href="\/dashboard\/activity\?after=([^"]+)"/.exec(first)?.[1] as string;
    expect(next).toBeDefined();
    const second = (await get(b, `/dashboard/activity?after=${next}`)).body;
    const csv = parse((await get(b, `/dashboard/activity.csv?after=${next}`)).body, {
      columns: true,
    }) as Record<string, string>[];
    expect(csv).toHaveLength(10);
    for (const row of csv) {
      expect(second).toContain(row.generation_id);
      expect(first).not.toContain(row.generation_id);
    }
    expect(cell(second, 'total="listed"')).toBe('$0.00000001');
  });

  it('needs a session, is linked from the other pages, and has no inline script or style', async () => {
    const d = dashboard();
    expect((await d.get(d.browser(), '/dashboard/activity')).status).toBe(302);
    expect((await d.get(d.browser(), '/dashboard/activity.csv')).status).toBe(302);
    const { b, get } = await signedIn();
    expect((await get(b, '/dashboard/billing')).body).toContain('href="/dashboard/activity"');
    const page = (await get(b, '/dashboard/activity')).body;
    expect(page).toContain('<svg');
    expect(page).not.toMatch(/\sstyle=/);
    expect(page).not.toMatch(/<script(?![^>]*\ssrc=)/);
  });
});
