/**
 * Billing's documents end to end on the local stack (the dashboard's Function URL behind its
 * CloudFront port, the local OpenID provider, the Stripe stand-in, DynamoDB Local): the billing
 * profile set through its form (mistakes answered 400 with why), a purchase through Checkout whose
 * invoice carries the profile and downloads as a PDF, an auto top-up's invoice made by the webhook,
 * and the month's statement (top-ups, a Stripe refund, an operator's correction, usage on two keys and
 * two tiers), whose CSV totals equal the ledger to the nano-dollar. Stripe's customer
 * search lags a minute there, as Stripe's may: each page finds the Customer just made all the same.
 */
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { monthOf } from '../../functions/billing/statement.js';
import { usdToNano } from '../../functions/core/money.js';
import type { ChargeEntry } from '../../functions/core/store.js';
import { removeCredits } from '../../lib/admin/operations.js';
import type { LocalStack } from '../../lib/local/stack.js';
import { Browser, formAction, type Page } from '../support/browser.js';
import { startTarget, type Target } from '../support/target.js';

const CENT = 10_000_000n;
let target: Target;
let local: LocalStack;
let store: DynamoStore;
let origin: string;

beforeAll(async () => {
  target = await startTarget();
  local = target.local as LocalStack;
  store = target.admin.store as DynamoStore;
  origin = local.emulator.url;
}, 120_000);

afterAll(async () => {
  await target?.stop();
});

async function signIn(browser: Browser): Promise<Page> {
  const page = await browser.open(`${origin}/dashboard/sign-in`);
  return browser.submit(page, formAction(page.body, /\/interaction\//), {
    email: local.oidc.user.email,
    password: local.oidc.user.password,
  });
}

/** Pays a Checkout the dashboard redirected to (a 303 to the stand-in's page), by card. */
async function payCheckout(browser: Browser, redirect: Response): Promise<void> {
  expect(redirect.status).toBe(303);
  const checkout = await browser.open(String(redirect.headers.get('location')));
  const pay = await browser.fetch(new URL(formAction(checkout.body, /./), checkout.url).href, {
    form: { method: 'card' },
    origin: new URL(checkout.url).origin,
  });
  expect(pay.status).toBe(303);
  await local.stripe.stripe.idle();
}

const PROFILE = {
  legal_name: 'Example GmbH',
  contacts: 'billing@example.com, ap@example.com',
  line1: 'Hauptstr. 1',
  postal_code: '10115',
  city: 'Berlin',
  country: 'de',
  tax_type_0: 'eu_vat',
  tax_value_0: 'DE 123 456 789',
  po_number: 'PO-4711',
};

describe('billing profile, invoices and statement on the local stack', () => {
  it('sets the profile, invoices a purchase and an auto top-up with it, and states the month as the ledger', async () => {
    const browser = new Browser();
    await signIn(browser);
    const accountId = (await store.accountOfUser(local.oidc.user.subject)) as string;
    const post = (path: string, form: Record<string, string>) =>
      browser.fetch(`${origin}${path}`, { form, origin });

    // The form, empty; mistakes are 400s that say what is wrong, and nothing is kept.
    const empty = await browser.open(`${origin}/dashboard/billing/profile`);
    expect(empty.status).toBe(200);
    expect(empty.body).toContain('name="legal_name"');
    const wrong = await post('/dashboard/billing/profile', {
      ...PROFILE,
      contacts: 'not-an-address',
      tax_value_0: 'DE12',
      country: 'Germany',
    });
    expect(wrong.status).toBe(400);
    const said = await wrong.text();
    expect(said).toContain('Not an e-mail address: not-an-address.');
    expect(said).toContain('Tax ID 1: not a valid EU VAT number');
    expect(said).toContain('Country: its two-letter code');
    expect(said).toContain('value="Example GmbH"');

    const saved = await post('/dashboard/billing/profile', PROFILE);
    expect(saved.status).toBe(303);
    const shown = await browser.open(`${origin}${saved.headers.get('location')}`);
    expect(shown.body).toContain('Saved');
    expect(shown.body).toContain('value="DE123456789"');
    expect(shown.body).toContain('value="PO-4711"');
    const customers = [...local.stripe.stripe.customers.values()].filter(
      (c) => (c.metadata as Record<string, string>)?.accountId === accountId,
    );
    expect(customers).toHaveLength(1);
    expect(customers[0]).toMatchObject({ name: 'Example GmbH', email: 'billing@example.com' });
    // Shown at once, though Stripe's search (the stand-in's, a minute behind as Stripe's) has it not
    // yet: the dashboard remembered the Customer it made in its table.
    expect(local.stripe.stripe.searchableCustomers().some((c) => c.current.id === customers[0]?.id)).toBe(
      false,
    );
    expect(await store.billingCustomerOf(accountId)).toBe(customers[0]?.id);

    // $10 through Checkout: its invoice carries the profile and downloads.
    await payCheckout(browser, await post('/dashboard/billing/checkout', { amount: '1000' }));
    let invoices = await browser.open(`${origin}/dashboard/billing/invoices`);
    const pdfs = () => [...invoices.body.matchAll(/href="([^"]+\/pdf)"/g)].map((m) => m[1] as string);
    expect(pdfs()).toHaveLength(1);
    expect(invoices.body).toContain('$10.00');
    const pdf = await fetch(String(pdfs()[0]));
    expect(pdf.headers.get('content-type')).toBe('application/pdf');
    const text = Buffer.from(await pdf.arrayBuffer()).toString('latin1');
    expect(text.startsWith('%PDF-')).toBe(true);
    for (const carried of [
      'Example GmbH',
      'Hauptstr. 1',
      'Tax ID \\(eu_vat\\): DE123456789',
      'PO number: PO-4711',
    ])
      expect(text).toContain(`(${carried}) Tj`);

    // A card saved ($20), auto top-up on below $100: the watch buys $20, the webhook credits and invoices it.
    await payCheckout(browser, await post('/dashboard/billing/auto-top-up/card', { buy: '20' }));
    const on = await post('/dashboard/billing/auto-top-up', { below: '100', buy: '20', enabled: 'on' });
    expect(on.status).toBe(303);
    await local.watch();
    await local.stripe.stripe.idle();
    await local.watch();
    await local.stripe.stripe.idle();
    expect((await store.getAccount(accountId))?.balanceNano).toBeGreaterThanOrEqual(5_000n * CENT);
    invoices = await browser.open(`${origin}/dashboard/billing/invoices`);
    const all = [...local.stripe.invoices.invoices.values()].filter((i) => i.customer === customers[0]?.id);
    const auto = all.filter((i) => i.description === 'API credits (auto top-up)');
    expect(auto.length).toBeGreaterThanOrEqual(1);
    expect(auto[0]).toMatchObject({ status: 'paid', total: 2_000, customer_name: 'Example GmbH' });
    expect(pdfs()).toHaveLength(all.length);
    expect(all.every((i) => i.status === 'paid')).toBe(true);

    // Some usage on two keys and two tiers, then the month's statement: equal to the ledger.
    const settler = local.storeAs('completions');
    for (const [i, [keyId, tier, nano]] of (
      [
        ['key_a', 'svc-fast', 123_456_789n],
        ['key_b', 'svc-pro', 1n],
        ['key_a', 'svc-pro', 999_999_999n],
      ] as const
    ).entries()) {
      const entry: ChargeEntry = {
        accountId,
        generationId: `gen-${Math.floor(Date.now() / 1000)}-statement${i}`,
        keyId,
        tier,
        upstreamModel: 'sim',
        promptTokens: 1,
        completionTokens: 1,
        cachedTokens: 0,
        upstreamCostUsd: '0',
        billedNano: nano,
        estimated: false,
        createdAt: new Date().toISOString(),
      };
      expect(await settler.settleCharge(entry)).toBe('settled');
    }
    // A refund of $3.00 of the $10 purchase through Stripe (the webhook takes it back), and $0.25
    // taken back by the operator: the month has a refund and a correction as well.
    const purchase = (await store.listLedger(accountId)).find(
      (e) => e.type === 'topup' && e.deltaNano === 1_000n * CENT,
    );
    const intent = String(purchase?.reference).replace(/^stripe:/, '');
    expect(intent).toMatch(/^pi_/);
    await local.stripe.stripe.refund(intent, 300);
    await local.stripe.stripe.idle();
    await removeCredits(target.admin, accountId, '0.25', 'statement-goodwill-fix');
    const month = monthOf(new Date().toISOString());
    const ledger = await store.listLedger(accountId);
    const sum = (type: string) =>
      ledger
        .filter((e) => e.type === type && monthOf(e.createdAt) === month)
        .reduce((a, e) => a + e.deltaNano, 0n);
    const csv = await browser.fetch(`${origin}/dashboard/billing/statement/${month}.csv`);
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toContain('text/csv');
    const rows = parse(await csv.text(), { columns: true }) as Record<string, string>[];
    const amount = (section: string) => usdToNano(rows.find((r) => r.section === section)?.amount_usd ?? 'x');
    expect(amount('total_top_ups')).toBe(sum('topup'));
    const taken = (refund: boolean) =>
      -ledger
        .filter(
          (e) =>
            e.type === 'correction' &&
            monthOf(e.createdAt) === month &&
            String(e.reference).startsWith('stripe:refund:') === refund,
        )
        .reduce((a, e) => a + e.deltaNano, 0n);
    expect(amount('total_refunds')).toBe(300n * CENT);
    expect(amount('total_refunds')).toBe(taken(true));
    expect(amount('total_corrections')).toBe(25n * CENT);
    expect(amount('total_corrections')).toBe(taken(false));
    expect(amount('total_usage')).toBe(-sum('charge'));
    expect(amount('total_usage')).toBeGreaterThanOrEqual(1_123_456_789n);
    expect(amount('closing_balance')).toBe(ledger.reduce((a, e) => a + e.deltaNano, 0n));
    expect(amount('closing_balance')).toBe((await store.getAccount(accountId))?.balanceNano);
    expect(
      amount('opening_balance') +
        amount('total_top_ups') -
        amount('total_refunds') -
        amount('total_corrections') -
        amount('total_usage'),
    ).toBe(amount('closing_balance'));
    const byKey = rows.filter((r) => r.section === 'usage_by_key');
    expect(byKey.find((r) => r.item === 'key_a')?.amount_usd).toBe('1.123456788');
    const page = await browser.open(`${origin}/dashboard/billing/statement/${month}`);
    expect(page.status).toBe(200);
    expect(page.body).toContain('Closing balance');
    expect((await browser.fetch(`${origin}/dashboard/billing/statement/2026-13`)).status).toBe(404);
  });
});
