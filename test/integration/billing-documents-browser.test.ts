/**
 * Billing's documents in headless Chromium (test/support/chromium.ts) against the local stack, done by
 * the account's billing member (not its owner): the billing profile filled in through its form, a $10 purchase through the Stripe stand-in's checkout
 * page, its invoice listed with the profile's name in its PDF; a card saved and auto top-up switched on,
 * the watch's top-up invoiced the same way; and the month's statement. Each page
 * is shot at 1280 and 390 px wide into test-results/billing/ (git-ignored), and none of them scrolls
 * sideways at either width. Every wait is on the page or on the stand-in's deliveries, never a sleep.
 * Without /usr/bin/chromium the file is skipped with a message, except in CI (CI=true), where it fails.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { monthOf } from '../../functions/billing/statement.js';
import { auditEntry, INVITATION_TTL_SECONDS } from '../../functions/core/team.js';
import { REPO_ROOT } from '../../lib/infra/service-function.js';
import type { LocalStack } from '../../lib/local/stack.js';
import { chromiumMissing, launchChromium } from '../support/chromium.js';
import { startTarget, type Target } from '../support/target.js';

const SHOTS = `${REPO_ROOT}test-results/billing`;
/** The account's billing member, who does all of it (the invitation's own flow is the team browser test's). */
const BILLING = { email: 'billing@team.example', password: 'billing-pass', subject: 'team-billing' };
const WIDTHS = [1280, 390] as const;

const missing = chromiumMissing();
let target: Target;
let local: LocalStack;
let browser: Browser | undefined;
let page: Page;

beforeAll(async () => {
  if (missing) {
    console.warn(`the billing documents' browser test is skipped: ${missing}`);
    return;
  }
  await mkdir(SHOTS, { recursive: true });
  [target, browser] = await Promise.all([startTarget({ oidcUsers: [BILLING] }), launchChromium()]);
  local = target.local as LocalStack;
  const context = await browser.newContext({
    viewport: { width: 1280, height: 800 },
    colorScheme: 'light',
    locale: 'en-US',
  });
  context.setDefaultTimeout(10_000);
  context.setDefaultNavigationTimeout(15_000);
  page = await context.newPage();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await target?.stop();
});

async function go(click: () => Promise<void>, url: (u: URL) => boolean) {
  await Promise.all([page.waitForURL(url, { waitUntil: 'load' }), click()]);
}

/** The page at each width: shot, and never wider than the window (no sideways scroll). */
async function shoot(name: string): Promise<void> {
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: 800 });
    const overflow = Number(await page.evaluate('document.documentElement.scrollWidth - window.innerWidth'));
    expect(overflow, `${name} at ${width} px scrolls sideways`).toBeLessThanOrEqual(0);
    await page.screenshot({ path: `${SHOTS}/${name}-${width}.png`, fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 800 });
}

describe('billing documents in headless Chromium', () => {
  it('fills the profile in, buys $10, turns auto top-up on, lists each top-up’s invoice, shows the statement: each fits 1280 and 390 px', async (ctx) => {
    if (missing) return ctx.skip(`no browser: ${missing}`);
    const origin = local.emulator.url;
    const { oidc, stripe: standIn } = local;
    // An account whose owner invited a billing member, who accepted: through the store, each change
    // with its audit entry, as the Members page makes them.
    const store = target.admin.store;
    const at = new Date().toISOString();
    const teamAccount = `acct-billing-${randomBytes(6).toString('hex')}`;
    const owner = { kind: 'member' as const, subject: oidc.user.subject, email: oidc.user.email };
    await store.createAccount(teamAccount, 0n, at);
    await store.addFirstOwner(
      { accountId: teamAccount, subject: owner.subject, email: owner.email, role: 'owner', joinedAt: at },
      auditEntry(teamAccount, owner, 'member.joined', at),
    );
    const token = randomBytes(16).toString('hex');
    const invitationId = `inv_${randomBytes(12).toString('hex')}`;
    await store.createInvitation(
      {
        accountId: teamAccount,
        invitationId,
        tokenHash: createHash('sha256').update(token).digest('hex'),
        email: BILLING.email,
        role: 'billing',
        invitedBy: owner.subject,
        createdAt: at,
        expiresAt: Math.floor(Date.now() / 1000) + INVITATION_TTL_SECONDS,
      },
      auditEntry(teamAccount, owner, 'member.invited', at, { target: BILLING.email }),
    );
    const person = { subject: BILLING.subject, email: BILLING.email };
    await store.acceptInvitation(
      teamAccount,
      invitationId,
      createHash('sha256').update(token).digest('hex'),
      person,
      at,
      auditEntry(teamAccount, { kind: 'member', ...person }, 'member.joined', at),
    );
    await page.goto(`${origin}/dashboard/sign-in`);
    await page.getByLabel('Email').fill(BILLING.email);
    await page.getByLabel('Password').fill(BILLING.password);
    await go(
      () => page.getByRole('button', { name: 'Sign in' }).click(),
      (u) => u.href === local.dashboardUrl,
    );
    // Signed in as the billing member, on the owner's account.
    expect((await page.locator('[data-signed-in]').textContent())?.trim()).toBe(`${BILLING.email} (billing)`);

    await page.goto(`${origin}/dashboard/billing`);
    await shoot('billing');
    await go(
      () => page.getByRole('link', { name: 'Billing profile' }).click(),
      (u) => u.pathname === '/dashboard/billing/profile',
    );
    await page.getByLabel('Legal name').fill('Example Widgets GmbH');
    await page.getByLabel('Billing e-mails').fill('billing@example.com, ap@example.com');
    await page.getByLabel('Address', { exact: true }).fill('Hauptstraße 1');
    await page.getByLabel('Postal code').fill('10115');
    await page.getByLabel('City').fill('Berlin');
    await page.getByLabel('Country').fill('DE');
    await page.getByLabel('Tax ID 1 type').selectOption('eu_vat');
    await page.getByLabel('Tax ID 1 value').fill('DE123456789');
    await page.getByLabel('PO number').fill('PO-4711');
    // A mistake first: the page says why, with what was typed.
    await page.getByLabel('Tax ID 2 type').selectOption('gb_vat');
    await page.getByLabel('Tax ID 2 value').fill('GB12');
    await go(
      () => page.getByRole('button', { name: 'Save' }).click(),
      (u) => u.pathname === '/dashboard/billing/profile',
    );
    expect(await page.getByRole('alert').textContent()).toContain('Tax ID 2: not a valid UK VAT number');
    await shoot('profile-refused');
    await page.getByLabel('Tax ID 2 value').fill('');
    await go(
      () => page.getByRole('button', { name: 'Save' }).click(),
      (u) => u.search === '?saved=1',
    );
    expect(await page.getByRole('status').textContent()).toContain('Saved');
    await shoot('profile');

    await page.goto(`${origin}/dashboard/billing`);
    await go(
      () => page.getByRole('button', { name: '$10', exact: true }).click(),
      (u) => u.href.startsWith(`${standIn.url}/checkout/cs_`),
    );
    await go(
      () => page.getByRole('button', { name: 'Pay $10.00', exact: true }).click(),
      (u) => u.pathname === '/dashboard/billing/success',
    );
    await standIn.stripe.idle();
    await page.goto(`${origin}/dashboard/billing/invoices`);
    const pdf = page.getByRole('link', { name: 'PDF' });
    expect(await pdf.count()).toBe(1);
    expect(await page.locator('table.invoices tbody').textContent()).toContain('$10.00');
    const document = await (await fetch(String(await pdf.getAttribute('href')))).arrayBuffer();
    expect(Buffer.from(document).toString('latin1')).toContain('(Example Widgets GmbH) Tj');

    // Auto top-up: a card saved by buying $20 with it on the stand-in's page, then "below $100, buy
    // $20" switched on; the balance ($30) is below it, so the watch charges the card, and the webhook
    // credits the payment and invoices it, with the profile, as Checkout's are.
    await page.goto(`${origin}/dashboard/billing`);
    await page.getByLabel('Buy (USD) and save the card').fill('20');
    await go(
      () => page.getByRole('button', { name: 'Save a card' }).click(),
      (u) => u.href.startsWith(`${standIn.url}/checkout/cs_`),
    );
    await go(
      () => page.getByRole('button', { name: 'Pay $20.00', exact: true }).click(),
      (u) => u.pathname === '/dashboard/billing/success',
    );
    await standIn.stripe.idle();
    await page.goto(`${origin}/dashboard/billing`);
    const autoTopUp = page.locator('form[action="/dashboard/billing/auto-top-up"]');
    await autoTopUp.getByLabel('When below (USD)').fill('100');
    await autoTopUp.getByLabel('buy (USD)', { exact: true }).fill('20');
    await autoTopUp.getByLabel('On').check();
    await go(
      () => autoTopUp.getByRole('button', { name: 'Save' }).click(),
      (u) => u.pathname === '/dashboard/billing',
    );
    expect(await autoTopUp.getByLabel('On').isChecked()).toBe(true);
    await local.watch();
    await standIn.stripe.idle();
    await page.goto(`${origin}/dashboard/billing/invoices`);
    const rows = page.locator('table.invoices tbody tr');
    expect(await rows.count()).toBe(3);
    const automatic = rows.filter({ hasText: 'API credits (auto top-up)' });
    expect(await automatic.count()).toBe(1);
    expect(await automatic.textContent()).toContain('$20.00');
    expect(await automatic.textContent()).toContain('Paid');
    const automaticPdf = await (
      await fetch(String(await automatic.getByRole('link', { name: 'PDF' }).getAttribute('href')))
    ).arrayBuffer();
    expect(Buffer.from(automaticPdf).toString('latin1')).toContain('(Example Widgets GmbH) Tj');
    await shoot('invoices');

    await go(
      () => page.getByRole('link', { name: 'Monthly statement' }).click(),
      (u) => u.pathname === `/dashboard/billing/statement/${monthOf(new Date().toISOString())}`,
    );
    // Top-ups this month: $10 bought, $20 with the card saved, $20 bought by auto top-up.
    expect(await page.locator('.statement-totals').textContent()).toContain('$50.00');
    await shoot('statement');
    await page.emulateMedia({ media: 'print' });
    await page.screenshot({ path: `${SHOTS}/statement-print.png`, fullPage: true });
    await page.emulateMedia({ media: 'screen' });
  });
});
