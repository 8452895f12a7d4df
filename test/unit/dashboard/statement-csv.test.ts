import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { monthlyStatement } from '../../../functions/billing/statement.js';
import type { KeyRecord, LedgerEntry } from '../../../functions/core/store.js';
import { statementCsv } from '../../../functions/dashboard/statement-page.js';

const entries: LedgerEntry[] = [
  {
    entryId: 'topup#a',
    type: 'topup',
    createdAt: '2026-11-30T23:59:59.999Z',
    deltaNano: 1_000_000_000n,
    reference: 'a',
  },
  {
    entryId: 'gen-1',
    type: 'charge',
    createdAt: '2026-12-01T00:00:00.000Z',
    deltaNano: -1_500_000_001n,
    keyId: 'k1',
    tier: 'svc-pro',
  },
  {
    entryId: 'correction#stripe:refund:re_1',
    type: 'correction',
    createdAt: '2026-12-02T00:00:00.000Z',
    deltaNano: -7n,
    reference: 'stripe:refund:re_1',
  },
];
const keys = [{ keyId: 'k1', name: '=HYPERLINK("http://evil")' }] as KeyRecord[];

describe('the statement CSV', () => {
  it('writes every section exactly, a balance below zero signed, a formula-like key name neutralised', () => {
    const rows = parse(statementCsv(monthlyStatement(entries, '2026-12'), keys), { columns: true }) as Record<
      string,
      string
    >[];
    expect(rows.map((r) => [r.section, r.item, r.name, r.requests, r.amount_usd])).toEqual([
      ['opening_balance', '', '', '', '1'],
      ['refund', 'stripe:refund:re_1', '', '', '0.000000007'],
      ['usage_by_key', 'k1', `'=HYPERLINK("http://evil")`, '1', '1.500000001'],
      ['usage_by_tier', 'svc-pro', '', '1', '1.500000001'],
      ['total_top_ups', '', '', '', '0'],
      ['total_refunds', '', '', '', '0.000000007'],
      ['total_corrections', '', '', '', '0'],
      ['total_usage', '', '', '1', '1.500000001'],
      ['closing_balance', '', '', '', '-0.500000008'],
    ]);
    expect(rows[0]?.time_utc).toBe('2026-12-01T00:00:00.000Z');
    expect(rows.at(-1)?.time_utc).toBe('2027-01-01T00:00:00.000Z');
  });
});
