/**
 * The Overview: balance, spend this month and over the last 30 days (each equal to the ledger's sum to
 * the nano-dollar), a trend chart, and a quick start that names the base URL and the newest key's
 * prefix, never a key's text. In process over the memory store (support.ts).
 */
import { describe, expect, it } from 'vitest';
import { newGenerationId } from '../../../functions/core/ids.js';
import { chargeEntry } from '../../support/fixtures.js';
import { accountOf, dashboard, ORIGIN } from './support.js';

const KEY_IN_PAGE = /svc_live_[0-9A-Za-z]{43}/;
const figure = (page: string, name: string) =>
  new RegExp(`data-figure="${name}"[^>]*>([^<]*)<`).exec(page)?.[1];

describe('Overview', () => {
  it('shows the balance, this month and the last 30 days equal to the ledger, and a quick start without a secret', async () => {
    const d = dashboard();
    const b = d.browser();
    d.clock.now = new Date('2025-06-03T12:00:00Z');
    await d.signIn(b, 'user-1');
    const accountId = accountOf(d.store, 'user-1');
    const empty = await d.get(b, '/dashboard/');
    expect(empty.body).toContain('create one</a>');
    await d.store.topUp(accountId, 'test:1', 10_000_000_000n, '2025-05-01T00:00:00Z');
    await d.post(b, '/dashboard/settings/api/keys', { name: 'prod' });
    const [key] = await d.store.listKeys(accountId);
    const charge = (nano: bigint, at: string, tier = 'svc-fast') =>
      d.store.settleCharge(
        chargeEntry(accountId, key?.keyId as string, nano, {
          generationId: newGenerationId(Date.parse(at), 0),
          createdAt: at,
          tier,
        }),
      );
    await charge(7n, '2025-05-31T23:59:59.999Z');
    await charge(123_456_789n, '2025-06-01T00:00:00.000Z', 'svc-pro');
    await charge(5n, '2025-06-03T08:00:00.000Z');
    await charge(1_000n, '2025-05-04T00:00:00.000Z'); // 31 days back: not in the last 30
    const page = (await d.get(b, '/dashboard/')).body;
    expect(figure(page, 'balance')).toBe('$9.876542199');
    expect(figure(page, 'month')).toBe('$0.123456794');
    expect(figure(page, '30d')).toBe('$0.123456801');
    expect(page).toContain('Spent in 2025-06 (UTC)');
    expect(page).toContain('role="img"');
    expect(page).toContain(`${ORIGIN}/api/v1`);
    expect(page).toContain(`curl ${ORIGIN}/api/v1/chat/completions`);
    expect(page).toContain(`${key?.displayPrefix} (prod)`);
    expect(page).not.toMatch(KEY_IN_PAGE);
  });

  it('signed out: the welcome page, no figures', async () => {
    const d = dashboard();
    const page = await d.get(d.browser(), '/dashboard/');
    expect(page.status).toBe(200);
    expect(page.body).toContain('Sign in');
    expect(page.body).not.toContain('data-figure');
  });
});
