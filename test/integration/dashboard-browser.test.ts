/**
 * The dashboard end to end in a real browser: headless Chromium (Debian's `chromium` package, driven
 * by playwright-core: test/support/chromium.ts) against the local stack, the dashboard behind the
 * emulated distribution. It signs in through the local OpenID provider's own page, creates a key and
 * reads it from the page (and through the Copy button's script, which the CSP must let run), calls the
 * API with it through the official `openai` SDK, buys $10 on the Stripe stand-in's checkout page, sees
 * the billing page's balance rise by exactly $10 and stay there while the stand-in delivers the event
 * three times out of order, revokes the key and sees the SDK's next call refused with a 401.
 *
 * Every wait is on the page (a URL, a selector) or on the stand-in's deliveries, never a sleep. A
 * screenshot of each page goes to test-results/dashboard/ (git-ignored). The README's image,
 * docs/images/dashboard-billing.png, is billing-after.png copied by hand: a run leaves tracked files
 * alone. Without /usr/bin/chromium the file is skipped with a message, except in CI (CI=true), where
 * it fails.
 */
import { mkdir } from 'node:fs/promises';
import OpenAI, { APIError, AuthenticationError } from 'openai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { REPO_ROOT } from '../../lib/infra/service-function.js';
import type { LocalStack } from '../../lib/local/stack.js';
import type { SentEvent } from '../../lib/local/stripe/state.js';
import { chromiumMissing, launchChromium } from '../support/chromium.js';
import { startTarget, type Target } from '../support/target.js';

const CENT = 10_000_000n;
const SHOTS = `${REPO_ROOT}test-results/dashboard`;

const missing = chromiumMissing();
let target: Target;
let local: LocalStack;
let browser: Browser | undefined;
let context: BrowserContext;
let page: Page;
/** What the pages reported that a browser would show a developer: script errors, CSP refusals. */
const problems: string[] = [];

beforeAll(async () => {
  if (missing) {
    console.warn(`the dashboard's browser test is skipped: ${missing}`);
    return;
  }
  await mkdir(SHOTS, { recursive: true });
  [target, browser] = await Promise.all([startTarget(), launchChromium()]);
  local = target.local as LocalStack;
  context = await browser.newContext({
    viewport: { width: 1100, height: 760 },
    colorScheme: 'light',
    locale: 'en-US',
  });
  context.setDefaultTimeout(10_000);
  context.setDefaultNavigationTimeout(15_000);
  // The Copy button writes to the clipboard, which a page may do only with the permission.
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: local.emulator.url });
  page = await context.newPage();
  page.on('pageerror', (error) => problems.push(`${page.url()}: ${error.message}`));
  page.on('console', (message) => {
    const from = message.location().url;
    // The icon the browser asks an origin for by itself where a page names none: the local provider's
    // and the Stripe stand-in's pages (404). The dashboard's pages name theirs (/dashboard/static/favicon.svg).
    if (message.type() === 'error' && !from.endsWith('/favicon.ico'))
      problems.push(`${page.url()}: ${message.text()} (${from})`);
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await target?.stop();
});

const shot = (name: string) => page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });
const text = async (selector: string) => ((await page.locator(selector).first().textContent()) ?? '').trim();
/** Follows a link or submits a form by its button, and waits for the page it leads to. */
async function go(click: () => Promise<void>, url: (u: URL) => boolean) {
  await Promise.all([page.waitForURL(url, { waitUntil: 'load' }), click()]);
}

describe('the dashboard in headless Chromium (local OpenID provider, Stripe stand-in, DynamoDB Local)', () => {
  it('signs in, creates a key the SDK uses, buys $10 once through checkout, revokes the key', async (ctx) => {
    if (missing) return ctx.skip(`no browser: ${missing}`);
    const origin = local.emulator.url;
    const { oidc, stripe: standIn } = local;
    const store = target.admin.store as DynamoStore;
    const client = (apiKey: string) =>
      new OpenAI({ baseURL: target.baseUrl, apiKey, maxRetries: 0, timeout: 15_000 });

    // Signed out: the welcome page; its Sign in goes to the provider's own page.
    await page.goto(local.dashboardUrl);
    expect(await text('h1')).toBe('Welcome');
    await go(
      () => page.locator('main').getByRole('link', { name: 'Sign in' }).click(),
      (u) => u.href.startsWith(`${oidc.issuer}/interaction/`),
    );
    await page.getByLabel('Email').fill(oidc.user.email);
    await page.getByLabel('Password').fill(oidc.user.password);
    await shot('sign-in');
    await go(
      () => page.getByRole('button', { name: 'Sign in' }).click(),
      (u) => u.href === local.dashboardUrl,
    );
    // A first sign-in: a $0 account, no key.
    expect(await text('h1')).toBe('Overview');
    expect(await text('.balance')).toBe('$0.00');
    await shot('home');
    const accountId = (await store.accountOfUser(oidc.user.subject)) as string;
    expect(await store.listKeys(accountId)).toEqual([]);

    // Settings → API: a key, shown once, read from the page and copied by the Copy button's script.
    await go(
      () => page.locator('header nav').getByRole('link', { name: 'API keys' }).click(),
      (u) => u.pathname === '/dashboard/settings/api',
    );
    await page.getByLabel('New key name').fill('browser test');
    await go(
      () => page.getByRole('button', { name: 'Create key' }).click(),
      (u) => u.pathname === '/dashboard/settings/api/keys',
    );
    const key = await page.getByLabel('New API key').inputValue();
    expect(key).toMatch(/^svc_live_[0-9A-Za-z]{43}$/);
    await page.getByRole('button', { name: 'Copy', exact: true }).click();
    await page.getByRole('button', { name: 'Copied', exact: true }).waitFor();
    // (An expression, not a function: the tests compile without the DOM's types.)
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(key);
    await shot('settings-api-new-key');

    // The API takes it (the official SDK); with $0 a completion is a 402 naming the billing page.
    expect((await client(key).models.list()).data.map((m) => m.id)).toContain('svc-fast');
    const ask = () =>
      client(key).chat.completions.create({
        model: 'svc-fast',
        messages: [{ role: 'user', content: 'Say hello [[sim:tokens=5]]' }],
      });
    const refused = await ask().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(APIError);
    expect((refused as APIError).status).toBe(402);
    const topUp = /^<([^>]+)>; rel="payment"$/.exec((refused as APIError).headers?.get('link') ?? '')?.[1];
    expect(topUp).toBe(`${origin}/dashboard/billing`);

    // Billing, reached by the 402's link: $0.00, nothing bought yet.
    await page.goto(String(topUp));
    expect(await text('h1')).toBe('Billing');
    expect(await text('.balance')).toBe('$0.00');
    await shot('billing-before');

    // $10 through Checkout: the stand-in's page, its Pay button. The event is held, so that it can be
    // delivered three times out of order afterwards.
    await go(
      () => page.getByRole('button', { name: '$10', exact: true }).click(),
      (u) => u.href.startsWith(`${standIn.url}/checkout/cs_`),
    );
    expect(await page.locator('body').textContent()).toContain('Pay $10.00 (USD)');
    await shot('checkout');
    standIn.stripe.hold();
    await go(
      () => page.getByRole('button', { name: 'Pay $10.00', exact: true }).click(),
      (u) => u.pathname === '/dashboard/billing/success',
    );
    const sessionId = new URL(page.url()).searchParams.get('session_id');
    await standIn.stripe.idle();
    const held = standIn.stripe.heldEvents();
    expect(held.map((e) => e.type)).toEqual(['checkout.session.completed']);
    const [{ id: eventId, event }] = held as [SentEvent];
    expect((event.data as { object: { id: string } }).object.id).toBe(sessionId);
    // Stripe has not confirmed it yet: the page says so, and no credit is shown.
    expect(await text('main p')).toContain('The credits are added when Stripe confirms it');
    expect(await text('.balance')).toBe('$0.00');

    // Three deliveries, out of order: a retry first, overtaking the original still held; then the
    // original and one more retry, at the same time.
    expect((await standIn.stripe.resend(eventId)).status).toBe(200);
    await go(
      () => page.getByRole('link', { name: 'Back to billing' }).click(),
      (u) => u.pathname === '/dashboard/billing',
    );
    expect(await text('.balance')).toBe('$10.00');
    const late = await Promise.all([standIn.stripe.release([eventId]), standIn.stripe.resend(eventId)]);
    expect(late.flat().map((d) => d.status)).toEqual([200, 200]);
    expect(standIn.stripe.deliveries.filter((d) => d.eventId === eventId)).toHaveLength(3);
    await page.reload();
    expect(await text('.balance')).toBe('$10.00');
    const rows = page.locator('table tbody tr');
    expect(await rows.count()).toBe(1);
    expect(await rows.first().locator('td').nth(1).textContent()).toBe('Top-up');
    expect(await rows.first().locator('td.num').textContent()).toBe('$10.00');
    expect((await store.getAccount(accountId))?.balanceNano).toBe(1_000n * CENT);
    await shot('billing-after');

    // Funded: the same key now gets a completion.
    const completion = await ask();
    expect(completion.choices[0]?.finish_reason).toBe('stop');

    // Revoked on the page: the SDK's next call is a 401.
    await go(
      () => page.locator('header nav').getByRole('link', { name: 'API keys' }).click(),
      (u) => u.pathname === '/dashboard/settings/api',
    );
    expect(await page.locator('body').textContent()).not.toContain(key);
    await go(
      () => page.getByRole('button', { name: 'Revoke' }).click(),
      (u) => u.pathname.endsWith('/revoke'),
    );
    expect(await text('table tbody tr td:nth-child(4)')).toMatch(/^Revoked \d{4}-\d\d-\d\d \d\d:\d\d UTC$/);
    await shot('settings-api-revoked');
    const afterRevoke = await ask().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(afterRevoke).toBeInstanceOf(AuthenticationError);
    expect((afterRevoke as APIError).status).toBe(401);

    // Sign-out: back to the welcome page.
    await go(
      () => page.getByRole('button', { name: 'Sign out' }).click(),
      (u) => u.href === local.dashboardUrl,
    );
    expect(await text('h1')).toBe('Welcome');

    expect(problems).toEqual([]);
  }, 90_000);
});
