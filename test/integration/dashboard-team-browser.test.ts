/**
 * A company on the dashboard, in headless Chromium (test/support/chromium.ts) against the local stack
 * (DynamoDB Local, the local OpenID provider with three people, the SES stand-in): the owner invites a
 * developer and a viewer; the developer opens the e-mailed link, signs in, accepts and creates a key;
 * the viewer sees the keys but has no form to change them, and a POST of theirs is refused (403, no
 * key made); the owner removes the developer, whose next request finds them signed out, while the key
 * they made still works on the API; the audit log shows each step. Screenshots of the new pages at
 * 1280 and 390 px wide go to test-results/dashboard-team/, and at 390 no page scrolls sideways.
 *
 * Every wait is on the page (a URL, a selector), never a sleep. Skipped without /usr/bin/chromium,
 * except in CI.
 */
import { mkdir } from 'node:fs/promises';
import OpenAI from 'openai';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../lib/infra/service-function.js';
import type { LocalStack } from '../../lib/local/stack.js';
import { chromiumMissing, launchChromium } from '../support/chromium.js';
import { startTarget, type Target } from '../support/target.js';

const SHOTS = `${REPO_ROOT}test-results/dashboard-team`;
const DEVELOPER = { email: 'dev@team.example', password: 'dev-pass', subject: 'team-developer' };
const VIEWER = { email: 'viewer@team.example', password: 'viewer-pass', subject: 'team-viewer' };

const missing = chromiumMissing();
let target: Target;
let local: LocalStack;
let browser: Browser | undefined;
const problems: string[] = [];

beforeAll(async () => {
  if (missing) {
    console.warn(`the dashboard's team browser test is skipped: ${missing}`);
    return;
  }
  await mkdir(SHOTS, { recursive: true });
  [target, browser] = await Promise.all([startTarget({ oidcUsers: [DEVELOPER, VIEWER] }), launchChromium()]);
  local = target.local as LocalStack;
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await target?.stop();
});

/** A person at their own browser (own cookies, own sign-in at the provider). */
async function person(): Promise<Page> {
  const context = await (browser as Browser).newContext({
    viewport: { width: 1280, height: 800 },
    colorScheme: 'light',
    locale: 'en-US',
  });
  context.setDefaultTimeout(10_000);
  context.setDefaultNavigationTimeout(15_000);
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: local.emulator.url });
  const page = await context.newPage();
  page.on('pageerror', (error) => problems.push(`${page.url()}: ${error.message}`));
  // Chromium logs a page answered 401 or 403 as an error: the story opens two on purpose (the viewer's
  // 403, the removed developer's 401), each checked by its own assertions.
  page.on('console', (message) => {
    const expected = /status of 40[13] /.test(message.text());
    if (message.type() === 'error' && !expected && !message.location().url.endsWith('/favicon.ico'))
      problems.push(`${page.url()}: ${message.text()}`);
  });
  return page;
}

async function go(page: Page, click: () => Promise<void>, url: (u: URL) => boolean) {
  await Promise.all([page.waitForURL(url, { waitUntil: 'load' }), click()]);
}

/** Signs in on the provider's page the browser is on; ends on the dashboard's home. */
async function signInHere(page: Page, who: { email: string; password: string }) {
  await page.getByLabel('Email').fill(who.email);
  await page.getByLabel('Password').fill(who.password);
  await go(
    page,
    () => page.getByRole('button', { name: 'Sign in' }).click(),
    (u) => u.href === local.dashboardUrl,
  );
}

/** Screenshots of the page at 1280 and 390 px wide; at 390, nothing wider than the window. */
async function shots(page: Page, name: string) {
  await page.screenshot({ path: `${SHOTS}/${name}-1280.png`, fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  const sideways = await page.evaluate('document.documentElement.scrollWidth - window.innerWidth');
  await page.screenshot({ path: `${SHOTS}/${name}-390.png`, fullPage: true });
  await page.setViewportSize({ width: 1280, height: 800 });
  expect([name, sideways]).toEqual([name, 0]);
}

const nav = (page: Page, name: string, path: string) =>
  go(
    page,
    () => page.locator('header nav').getByRole('link', { name }).click(),
    (u) => u.pathname === path,
  );

const actionsOf = async (page: Page) =>
  (await page.locator('td[data-label="Action"]').allTextContents()).map((t) => t.trim());

describe('a team on the dashboard in headless Chromium', () => {
  it('owner invites; developer accepts and makes a key; viewer reads only; the developer removed is signed out; the audit log tells it', async (ctx) => {
    if (missing) return ctx.skip(`no browser: ${missing}`);
    const owner = await person();
    await owner.goto(`${local.dashboardUrl}sign-in`);
    await signInHere(owner, local.oidc.user);
    expect(await owner.locator('h1').textContent()).toBe('Overview');

    // Settings → Members: the owner alone; invitations to a developer and a viewer.
    await nav(owner, 'Members', '/dashboard/settings/members');
    await shots(owner, 'members-alone');
    const invite = async (email: string, role: string) => {
      await owner.getByLabel('E-mail', { exact: true }).fill(email);
      await owner.getByLabel('Role', { exact: true }).selectOption({ label: role });
      await go(
        owner,
        () => owner.getByRole('button', { name: 'Send invitation' }).click(),
        (u) => u.pathname === '/dashboard/settings/members',
      );
      return owner.getByLabel('Invitation link').inputValue();
    };
    const developerLink = await invite(DEVELOPER.email, 'Developer');
    await shots(owner, 'members-invited');
    const viewerLink = await invite(VIEWER.email, 'Viewer');
    // The e-mails go out through the balance watch's outbox and SES, each to its invited address.
    await local.watch();
    const mailTo = (email: string) => local.ses.messages.find((m) => m.to.includes(email));
    expect(mailTo(DEVELOPER.email)?.text).toContain(developerLink);
    expect(mailTo(VIEWER.email)?.text).toContain(viewerLink);

    // The developer: the link, Accept, the provider's sign-in, back on the account.
    const developer = await person();
    await developer.goto(developerLink);
    expect(await developer.locator('h1').textContent()).toBe('Join an account');
    await shots(developer, 'invitation');
    await go(
      developer,
      () => developer.getByRole('button', { name: 'Accept and sign in' }).click(),
      (u) => u.href.startsWith(`${local.oidc.issuer}/interaction/`),
    );
    await signInHere(developer, DEVELOPER);
    await nav(developer, 'API keys', '/dashboard/settings/api');
    await developer.getByLabel('New key name').fill('team key');
    await go(
      developer,
      () => developer.getByRole('button', { name: 'Create key' }).click(),
      (u) => u.pathname === '/dashboard/settings/api',
    );
    const key = await developer.getByLabel('New API key').inputValue();
    expect(key).toMatch(/^svc_live_/);
    const row = developer.locator('tr', { hasText: 'team key' });
    expect(await row.locator('td[data-label="Created by"]').textContent()).toBe(DEVELOPER.email);
    await shots(developer, 'keys-developer');

    // The viewer: sees the key, no form to change anything; a POST anyway is refused.
    const viewer = await person();
    await viewer.goto(viewerLink);
    await go(
      viewer,
      () => viewer.getByRole('button', { name: 'Accept and sign in' }).click(),
      (u) => u.href.startsWith(`${local.oidc.issuer}/interaction/`),
    );
    await signInHere(viewer, VIEWER);
    await nav(viewer, 'API keys', '/dashboard/settings/api');
    expect(await viewer.locator('tr', { hasText: 'team key' }).count()).toBe(1);
    expect(await viewer.getByRole('button', { name: 'Create key' }).count()).toBe(0);
    expect(await viewer.locator('summary', { hasText: 'Revoke' }).count()).toBe(0);
    expect(await viewer.getByRole('button', { name: 'Yes, revoke it' }).count()).toBe(0);
    await shots(viewer, 'keys-viewer');
    const store = target.admin.store;
    const accountId = (await store.accountOfUser(local.oidc.user.subject)) as string;
    const refused = await viewer.request.post(`${local.emulator.url}/dashboard/settings/api/keys`, {
      form: { name: 'sneaky' },
      headers: { origin: local.emulator.url },
      maxRedirects: 0,
    });
    expect(refused.status()).toBe(403);
    expect(await refused.text()).toContain('Your role on this account is Viewer');
    expect((await store.listKeys(accountId)).map((k) => k.name)).toEqual(['team key']);
    expect(await viewer.locator('header nav').getByRole('link', { name: 'Audit log' }).count()).toBe(0);
    await viewer.goto(`${local.dashboardUrl}settings/audit`);
    expect(await viewer.locator('h1').textContent()).toBe('Not allowed');
    await shots(viewer, 'forbidden');

    // The owner removes the developer: their next request is signed out; their key still works.
    await owner.reload();
    // The first click asks (a confirmation), the second removes.
    await owner.locator(`summary[aria-label="Remove ${DEVELOPER.email}"]`).click();
    await go(
      owner,
      () => owner.getByRole('button', { name: 'Yes, remove' }).click(),
      (u) => u.pathname === '/dashboard/settings/members',
    );
    expect(await owner.getByRole('status').textContent()).toContain(`${DEVELOPER.email} was removed`);
    const listed = await owner.locator('td[data-label="E-mail"]').allTextContents();
    expect(listed.map((t) => t.trim())).toEqual([`${local.oidc.user.email} (you)`, VIEWER.email]);
    await shots(owner, 'members-team');
    await developer.goto(`${local.dashboardUrl}settings/api`);
    expect(await developer.locator('h1').textContent()).toBe('Signed out');
    expect(await developer.locator('main').textContent()).toContain('no longer a member');
    const api = new OpenAI({ baseURL: target.baseUrl, apiKey: key, maxRetries: 0, timeout: 15_000 });
    expect((await api.models.list()).data.map((m) => m.id)).toContain('svc-fast');

    // The audit log, newest first: every step, by whom.
    await nav(owner, 'Audit log', '/dashboard/settings/audit');
    expect(await actionsOf(owner)).toEqual([
      'Member removed',
      'Member joined',
      'Key created',
      'Member joined',
      'Member invited',
      'Member invited',
      'Member joined',
    ]);
    const who = (await owner.locator('td[data-label="Who"]').allTextContents()).map((t) => t.trim());
    expect(who).toEqual([
      local.oidc.user.email,
      VIEWER.email,
      DEVELOPER.email,
      DEVELOPER.email,
      local.oidc.user.email,
      local.oidc.user.email,
      local.oidc.user.email,
    ]);
    // Each entry's IP address: locally the address the Function URL saw (no CloudFront header).
    const ips = await owner.locator('td[data-label="IP address"]').allTextContents();
    expect(ips.every((ip) => /^(127\.0\.0\.1|::1|::ffff:127\.0\.0\.1)$/.test(ip.trim()))).toBe(true);
    await shots(owner, 'audit');
    await owner.getByLabel('Action').selectOption({ label: 'Key created' });
    await go(
      owner,
      () => owner.getByRole('button', { name: 'Filter' }).click(),
      (u) => u.searchParams.get('action') === 'key.created',
    );
    expect(await actionsOf(owner)).toEqual(['Key created']);
    expect(problems).toEqual([]);
  }, 120_000);
});
