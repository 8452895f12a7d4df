/**
 * The dashboard end to end in a real browser: headless Chromium (Debian's `chromium` package, driven
 * by playwright-core: test/support/chromium.ts) against the local stack, the dashboard behind the
 * emulated distribution. It signs in through the local OpenID provider's own page, creates a key and
 * reads it from the page (and through the Copy button's script, which the CSP must let run), calls the
 * API with it through the official `openai` SDK, buys $10 on the Stripe stand-in's checkout page, sees
 * the billing page's balance rise by exactly $10 and stay there while the stand-in delivers the event
 * three times out of order, makes two completions with the key (one JSON, one streamed, on two tiers),
 * sees them on the Activity page (each generation in the list at the cost the API reported, the day's
 * spend per tier in the chart's table equal to the ledger's to the nano-dollar), downloads the page's
 * CSV and compares it with the ledger row for row, revokes the key and sees the SDK's next call
 * refused with a 401.
 *
 * Every wait is on the page (a URL, a selector), on the stand-in's deliveries or on the ledger (polled
 * with a deadline: a settlement is written after its reply), never a sleep. A screenshot of each page
 * at 1280 and 390 px (judged: no sideways scroll, no axe-core violation; test/support/page-checks.ts)
 * and the downloaded activity.csv go to test-results/dashboard/ (git-ignored). The README's image,
 * docs/images/dashboard-billing.png, is billing-after-1280.png copied by hand: a run leaves tracked files
 * alone. Without /usr/bin/chromium the file is skipped with a message, except in CI (CI=true), where
 * it fails.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { parse } from 'csv-parse/sync';
import OpenAI, { APIError, AuthenticationError } from 'openai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { GENERATION_ID_PATTERN } from '../../functions/core/ids.js';
import { nanoToUsd, usdToNano } from '../../functions/core/money.js';
import { type LedgerEntry, utcDay } from '../../functions/core/store.js';
import { usd } from '../../functions/dashboard/pages.js';
import { REPO_ROOT } from '../../lib/infra/service-function.js';
import type { LocalStack } from '../../lib/local/stack.js';
import type { SentEvent } from '../../lib/local/stripe/state.js';
import { chromiumMissing, launchChromium } from '../support/chromium.js';
import { judgePage } from '../support/page-checks.js';
import { eventually } from '../support/sse.js';
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
  // Per-key daily caps on: the page's cap form is walked through below.
  [target, browser] = await Promise.all([
    startTarget({ env: { KEY_DAILY_CAPS: 'on' }, watchStream: false }),
    launchChromium(),
  ]);
  local = target.local as LocalStack;
  context = await browser.newContext({
    viewport: { width: 1280, height: 800 },
    colorScheme: 'light',
    locale: 'en-US',
    // The Activity page's CSV link is a download (download="activity.csv", an attachment).
    acceptDownloads: true,
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

/** What the dashboard's pages got wrong at 1280 or 390 px (sideways scroll, axe-core violations). */
const judged: string[] = [];
/** A screenshot of the page as it is; a dashboard page is also judged at 1280 and 390 px (page-checks.ts). */
const shot = async (name: string) => {
  if (!new URL(page.url()).pathname.startsWith('/dashboard'))
    return void (await page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true }));
  judged.push(...(await judgePage(page, SHOTS, name)));
};
const text = async (selector: string) => ((await page.locator(selector).first().textContent()) ?? '').trim();
/** A cell's dollar amount as the dashboard prints it ("$0.000012345") -> nano-USD, exactly. */
const nanoOf = (cell: string) => {
  expect(cell).toMatch(/^\$\d+\.\d{2,9}$/);
  return usdToNano(cell.slice(1));
};
/**
 * The billed cost the API returned (`usage.cost`, a bare JSON number the SDK parses to a double) ->
 * nano-USD. Exact: a cost has at most 9 decimals and far fewer than 15 significant digits, and
 * String() of a double is the shortest decimal that reads back as it, which is then that decimal.
 */
const billedNano = (usage: unknown) => {
  const cost = (usage as { cost?: unknown } | null | undefined)?.cost;
  expect(typeof cost).toBe('number');
  return usdToNano(String(cost));
};
/** The cells' texts of a table's body rows, row by row. */
async function bodyRows(table: ReturnType<Page['locator']>, cells = 'td'): Promise<string[][]> {
  const rows = table.locator('tbody tr');
  const out: string[][] = [];
  for (let i = 0; i < (await rows.count()); i++)
    out.push((await rows.nth(i).locator(cells).allTextContents()).map((t) => t.trim()));
  return out;
}
/** Follows a link or submits a form by its button, and waits for the page it leads to. */
async function go(click: () => Promise<void>, url: (u: URL) => boolean) {
  await Promise.all([page.waitForURL(url, { waitUntil: 'load' }), click()]);
}

describe('the dashboard in headless Chromium (local OpenID provider, Stripe stand-in, DynamoDB Local)', () => {
  it('signs in, creates a key the SDK uses, buys $10 once through checkout, sees its use in Activity and its CSV, revokes the key', async (ctx) => {
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
    // Post/Redirect/Get: the POST's 303 leads back to the page, which shows the key this once.
    await go(
      () => page.getByRole('button', { name: 'Create key' }).click(),
      (u) => u.pathname === '/dashboard/settings/api',
    );
    const key = await page.getByLabel('New API key').inputValue();
    expect(key).toMatch(/^svc_live_[0-9A-Za-z]{43}$/);
    await page.getByRole('button', { name: 'Copy', exact: true }).click();
    await page.getByRole('button', { name: 'Copied', exact: true }).waitFor();
    // (An expression, not a function: the tests compile without the DOM's types.)
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(key);
    await shot('settings-api-new-key');
    // A reload reads the page again: no second key, and the full key is not shown again.
    await page.reload({ waitUntil: 'load' });
    expect(await page.locator('body').textContent()).not.toContain(key);
    expect(await store.listKeys(accountId)).toHaveLength(1);

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
    // Stripe has not confirmed it yet: the page says the payment is being confirmed, and shows no
    // balance without it.
    expect(await text('main p')).toContain('Your payment of $10.00 is being confirmed');
    expect(await page.locator('.balance').count()).toBe(0);

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

    // Funded: the same key now gets completions, one JSON (svc-fast) and one streamed (svc-pro).
    const completion = await ask();
    expect(completion.choices[0]?.finish_reason).toBe('stop');
    const stream = await client(key).chat.completions.create({
      model: 'svc-pro',
      messages: [{ role: 'user', content: 'Count to five [[sim:tokens=7]]' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let streamedId = '';
    let streamedUsage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      streamedId ||= chunk.id;
      streamedUsage = chunk.usage ?? streamedUsage;
    }
    // What the API said of each generation: its id, tier, tokens and billed cost.
    const made = new Map(
      [
        { id: completion.id, tier: 'svc-fast', usage: completion.usage },
        { id: streamedId, tier: 'svc-pro', usage: streamedUsage },
      ].map(({ id, tier, usage }) => {
        expect(id).toMatch(GENERATION_ID_PATTERN);
        expect(usage?.completion_tokens).toBeGreaterThan(0);
        const nano = billedNano(usage);
        expect(nano).toBeGreaterThan(0n);
        return [
          id,
          { tier, prompt: usage?.prompt_tokens, completion: usage?.completion_tokens, nano },
        ] as const;
      }),
    );
    expect(made.size).toBe(2);

    // The ledger once both are settled (a settlement is written after its reply): polled, with a deadline.
    const charges = await eventually(async () => {
      const all = (await store.listLedger(accountId)).filter((e) => e.type === 'charge');
      return [...made.keys()].every((id) => all.some((e) => e.entryId === id)) ? all : undefined;
    }, 30_000);
    // Exactly these two (the 402 charged nothing), each as the API reported it.
    expect(charges.map((e) => e.entryId).sort()).toEqual([...made.keys()].sort());
    const ledgerOf = (id: string) => charges.find((e) => e.entryId === id) as LedgerEntry;
    for (const [id, api] of made) {
      const entry = ledgerOf(id);
      expect({
        id,
        tier: entry.tier,
        prompt: entry.promptTokens,
        completion: entry.completionTokens,
      }).toEqual({
        id,
        tier: api.tier,
        prompt: api.prompt,
        completion: api.completion,
      });
      expect(-entry.deltaNano).toBe(api.nano);
    }
    const [keyRecord] = await store.listKeys(accountId);
    expect(keyRecord?.name).toBe('browser test');

    // Activity: every generation in the list, newest first (by the charge's time to the ms, then its
    // id: an id names only its second), at the API's cost.
    await go(
      () => page.locator('header nav').getByRole('link', { name: 'Activity' }).click(),
      (u) => u.pathname === '/dashboard/activity',
    );
    expect(await text('h1')).toBe('Activity');
    const requests = page.locator('table', {
      has: page.locator('caption', { hasText: 'Requests, newest first' }),
    });
    const listed = await bodyRows(requests);
    const newestFirst = [...made.keys()].sort((a, b) => {
      const [at, bt] = [ledgerOf(a).createdAt, ledgerOf(b).createdAt];
      return at === bt ? b.localeCompare(a) : bt.localeCompare(at);
    });
    expect(listed.map((cells) => cells[1])).toEqual(newestFirst);
    for (const [time, id, keyName, tier, tokens, cost] of listed) {
      const entry = ledgerOf(id as string);
      const api = made.get(id as string);
      expect({ id, time, keyName, tier, tokens }).toEqual({
        id,
        time: `${entry.createdAt.slice(0, 10)} ${entry.createdAt.slice(11, 16)} UTC`,
        keyName: 'browser test',
        tier: api?.tier,
        tokens: `${api?.prompt} / ${api?.completion}`,
      });
      expect(nanoOf(cost as string), `the cost listed for ${id}`).toBe(api?.nano);
    }
    const spent = charges.reduce((sum, e) => sum - e.deltaNano, 0n);
    expect(nanoOf(await text('[data-total="listed"]'))).toBe(spent);

    // The chart's table (for screen readers): each tier's spend per UTC day equals the ledger's sum for
    // that day and tier, to the nano-dollar, every day of the 30 (today's is read live from the
    // settlement's own counters: no roll-up is needed for it, adapters/dynamodb/activity.ts).
    const spendTable = page.locator('table.spend-by-day');
    const columns = (await spendTable.locator('thead th').allTextContents()).map((t) => t.trim());
    expect(columns).toEqual(['Day (UTC)', 'svc-fast', 'svc-pro', 'Total']);
    // Its rows are the days with spend, each day's sum equal to the ledger's (the chart has all 30).
    const dayRows = await bodyRows(spendTable, 'th, td');
    const spendDays = new Set(charges.map((e) => utcDay(e.createdAt)));
    expect(dayRows).toHaveLength(spendDays.size);
    const today = dayRows.at(-1)?.[0];
    // The page's today is the UTC day of now (or of just before, if it crossed midnight since).
    expect([utcDay(new Date(Date.now() - 60_000).toISOString()), utcDay(new Date().toISOString())]).toContain(
      today,
    );
    const ledgerSpend = (day: string, tier?: string) =>
      charges
        .filter((e) => utcDay(e.createdAt) === day && (tier === undefined || e.tier === tier))
        .reduce((sum, e) => sum - e.deltaNano, 0n);
    for (const charge of charges) expect(dayRows.map((r) => r[0])).toContain(utcDay(charge.createdAt));
    for (const [day, fast, pro, total] of dayRows) {
      expect(
        { day, fast: nanoOf(fast as string), pro: nanoOf(pro as string), total: nanoOf(total as string) },
        `the spend of ${day} in the chart's table`,
      ).toEqual({
        day,
        fast: ledgerSpend(day as string, 'svc-fast'),
        pro: ledgerSpend(day as string, 'svc-pro'),
        total: ledgerSpend(day as string),
      });
    }
    expect(ledgerSpend(today as string)).toBeGreaterThan(0n);
    expect(nanoOf(await text('[data-total="30d"]'))).toBe(spent);
    // Spent per key: the one key, all of it.
    const perKey = page.locator('table', { has: page.locator('caption', { hasText: 'Spent per key' }) });
    const keyRows = await bodyRows(perKey);
    expect(keyRows.map(([name, prefix]) => [name, prefix])).toEqual([
      ['browser test', keyRecord?.displayPrefix],
    ]);
    expect(nanoOf(keyRows[0]?.[2] as string)).toBe(spent);
    // The chart itself: a bar for each tier that spent today, titled with the table's amount.
    const bars = (await page.locator('svg[role="img"] rect title').allTextContents()).map((t) => t.trim());
    const todayRow = dayRows.at(-1) as string[];
    expect(bars).toEqual(
      expect.arrayContaining([`${today} svc-fast: ${todayRow[1]}`, `${today} svc-pro: ${todayRow[2]}`]),
    );
    await shot('activity');

    // The Overview: this month's and the last 30 days' spend equal to the ledger's, the balance the
    // account's, and a quick start naming the base URL and the key's prefix (never the key).
    await go(
      () => page.locator('header').getByRole('link', { name: 'Hosted model API' }).click(),
      (u) => u.href === local.dashboardUrl,
    );
    expect(nanoOf(await text('[data-figure="30d"]'))).toBe(spent);
    expect(nanoOf(await text('[data-figure="month"]'))).toBe(spent);
    expect(nanoOf(await text('[data-figure="balance"]'))).toBe(
      (await store.getAccount(accountId))?.balanceNano,
    );
    expect(await text('#base-url')).toBe(target.baseUrl);
    // The header names who is signed in, and as what.
    expect(await text('[data-signed-in]')).toBe(`${oidc.user.email} (owner)`);
    expect(await page.locator('main').textContent()).toContain(keyRecord?.displayPrefix as string);
    expect(await page.locator('main').textContent()).not.toContain(key);
    await shot('overview');
    await go(
      () => page.locator('header nav').getByRole('link', { name: 'Activity' }).click(),
      (u) => u.pathname === '/dashboard/activity',
    );

    // The CSV, downloaded by the browser from the page's link: the page's rows, equal to the ledger's.
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'Download these rows (CSV)' }).click(),
    ]);
    expect(download.suggestedFilename()).toBe('activity.csv');
    await download.saveAs(`${SHOTS}/activity.csv`);
    expect(await download.failure()).toBeNull();
    const records = parse(await readFile(`${SHOTS}/activity.csv`, 'utf8'), { columns: true }) as Record<
      string,
      string
    >[];
    expect(records.map((r) => r.generation_id)).toEqual(newestFirst);
    for (const record of records) {
      const entry = ledgerOf(record.generation_id as string);
      expect(record).toEqual({
        time_utc: entry.createdAt,
        generation_id: entry.entryId,
        key_id: keyRecord?.keyId,
        key_name: 'browser test',
        tier: entry.tier,
        prompt_tokens: String(entry.promptTokens ?? 0),
        completion_tokens: String(entry.completionTokens ?? 0),
        cached_tokens: String(entry.cachedTokens ?? 0),
        cost_usd: nanoToUsd(-entry.deltaNano),
      });
      // The same cost, as text, as the API's and the page's.
      expect(usdToNano(record.cost_usd as string)).toBe(made.get(entry.entryId)?.nano);
    }

    // A daily spend cap set on the page: a request that spends past it is served (the cap had room
    // when it was admitted, on a hold of its worst case), and the SDK's next call is refused before
    // the upstream with a 402 naming the key's cap.
    await go(
      () => page.locator('header nav').getByRole('link', { name: 'API keys' }).click(),
      (u) => u.pathname === '/dashboard/settings/api',
    );
    expect(await page.locator('body').textContent()).not.toContain(key);
    await page.getByLabel('Daily cap, USD (empty: none)').fill('0.01');
    await go(
      () => page.getByRole('button', { name: 'Set cap' }).click(),
      (u) => u.pathname === '/dashboard/settings/api',
    );
    await page.getByText('$0.01 a day').waitFor();
    const long = await client(key).chat.completions.create({
      model: 'svc-pro',
      max_tokens: 7_000,
      messages: [{ role: 'user', content: 'Write at length [[sim:tokens=6000]]' }],
    });
    const longCost = usdToNano(String((long.usage as unknown as { cost: number }).cost));
    expect(longCost).toBeGreaterThanOrEqual(usdToNano('0.01'));
    const capped = await ask().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(capped).toBeInstanceOf(APIError);
    expect((capped as APIError).status).toBe(402);
    expect(JSON.stringify([(capped as APIError).error, (capped as APIError).message])).toContain(
      'Key daily spend cap reached',
    );
    // The page shows the cap and today's spend past it (the ledger has the long request, once settled).
    const capRow = await eventually(async () => {
      await page.reload();
      const body = (await page.locator('body').textContent()) ?? '';
      return /\$0\.01 a day, \$0\.0[1-9]\d* spent today/.test(body) ? body : undefined;
    });
    const spentToday = [...made.values()].reduce((sum, m) => sum + m.nano, longCost);
    expect(capRow).toContain(`$0.01 a day, ${usd(spentToday)} spent today (UTC)`);
    // And its status says the cap is reached for today, not Active.
    expect(capRow).toContain('Cap reached today (resets 00:00 UTC)');
    await shot('settings-api-capped');

    // Auto top-up: a card saved by buying $20 with it through Checkout, then "when below $40, buy
    // $25" (the balance is under $30 by then); one run of the balance watch buys once, off-session,
    // and the Billing page shows the balance up by exactly $25 once the webhook has landed.
    await go(
      () => page.locator('header nav').getByRole('link', { name: 'Billing' }).click(),
      (u) => u.pathname === '/dashboard/billing',
    );
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
    await eventually(async () => {
      await page.goto(`${origin}/dashboard/billing`);
      return ((await page.locator('body').textContent()) ?? '').includes('Saved card:') ? true : undefined;
    });
    await page.getByLabel('When below (USD)').fill('40');
    await page.getByLabel('buy (USD)', { exact: true }).fill('25');
    await page.getByLabel('On').check();
    await go(
      () =>
        page
          .locator('form[action="/dashboard/billing/auto-top-up"]')
          .getByRole('button', { name: 'Save' })
          .click(),
      (u) => u.pathname.startsWith('/dashboard/billing'),
    );
    const beforeTopUp = (await store.getAccount(accountId))?.balanceNano ?? 0n;
    expect(beforeTopUp).toBeLessThan(usdToNano('40'));
    const paymentsBefore = standIn.stripe.deliveries.length;
    await local.watch();
    await standIn.stripe.idle();
    expect(standIn.stripe.deliveries.length).toBeGreaterThan(paymentsBefore);
    const restored = await eventually(async () => {
      await page.goto(`${origin}/dashboard/billing`);
      const shown = await text('.balance');
      return shown === usd(beforeTopUp + usdToNano('25')) ? shown : undefined;
    });
    expect(restored).toBe(usd(beforeTopUp + usdToNano('25')));
    await local.watch();
    await standIn.stripe.idle();
    expect((await store.getAccount(accountId))?.balanceNano).toBe(beforeTopUp + usdToNano('25'));
    await shot('billing-auto-top-up');
    await go(
      () => page.locator('header nav').getByRole('link', { name: 'API keys' }).click(),
      (u) => u.pathname === '/dashboard/settings/api',
    );

    // Revoked on the page, after its confirmation (the first click only asks): the SDK's next call is a 401.
    await page.locator('summary', { hasText: 'Revoke' }).click();
    await page.getByText('this cannot be undone').waitFor();
    expect(await page.getByText(/^Revoked /).count()).toBe(0);
    await shot('settings-api-revoke-confirm');
    await go(
      () => page.getByRole('button', { name: 'Yes, revoke it' }).click(),
      (u) => u.pathname === '/dashboard/settings/api',
    );
    await page.getByText(/^Revoked /).waitFor();
    expect(
      (
        await page
          .locator('table tbody tr td', { hasText: /^Revoked / })
          .first()
          .textContent()
      )?.trim(),
    ).toMatch(/^Revoked \d{4}-\d\d-\d\d \d\d:\d\d UTC$/);
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
    await shot('welcome');

    expect(problems).toEqual([]);
    expect(judged).toEqual([]);
  }, 150_000);
});
