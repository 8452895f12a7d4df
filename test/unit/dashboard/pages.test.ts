/**
 * Settings → API, Billing, CSRF and the security headers of the dashboard, in process over the memory
 * store with stand-ins for the OpenID provider and Stripe (support.ts).
 */
import { describe, expect, it } from 'vitest';
import { hashKey, KEY_PATTERN } from '../../../functions/core/auth.js';
import { MAX_ACTIVE_KEYS } from '../../../functions/dashboard/accounts.js';
import { accountOf, dashboard, ORIGIN } from './support.js';

const KEY_IN_PAGE = /svc_live_[0-9A-Za-z]{43}/g;

async function signedIn(options: Parameters<typeof dashboard>[0] = {}) {
  const d = dashboard(options);
  const b = d.browser();
  await d.signIn(b, 'user-1');
  return { ...d, b, accountId: accountOf(d.store, 'user-1') };
}

describe('Settings → API', () => {
  it('shows a new key in full once (a readonly input and a copy button), stores only its hash, never shows it again', async () => {
    const { b, post, get, store, accountId } = await signedIn();
    const created = await post(b, '/dashboard/settings/api/keys', { name: 'laptop' });
    // Post/Redirect/Get: the POST answers 303 to the page, which shows the key once.
    expect(created.status).toBe(303);
    expect(created.headers.get('location')).toBe('/dashboard/settings/api');
    expect(await created.text()).not.toMatch(KEY_IN_PAGE);
    const shownOnce = await get(b, '/dashboard/settings/api');
    expect(shownOnce.status).toBe(200);
    const page = shownOnce.body;
    const shown = page.match(KEY_IN_PAGE) ?? [];
    expect(shown).toHaveLength(1);
    const key = shown[0] as string;
    expect(KEY_PATTERN.test(key)).toBe(true);
    expect(page).toMatch(/<input id="new-key" readonly="" value="svc_live_/);
    expect(page).toContain('data-copy="new-key"');
    const [record] = await store.listKeys(accountId);
    expect(record).toMatchObject({ name: 'laptop', status: 'active', keyHash: hashKey(key) });
    expect(JSON.stringify(record)).not.toContain(key);
    const later = await get(b, '/dashboard/settings/api');
    expect(later.body).toContain('laptop');
    expect(later.body).toContain(record?.displayPrefix);
    expect(later.body).not.toContain(key);
    expect(later.response.headers.get('cache-control')).toBe('no-store');
  });

  it('a reload after "Create key" reads the page again: one key, and its full text never shown twice', async () => {
    const { b, post, store, accountId } = await signedIn();
    const created = await b.open(`${ORIGIN}/dashboard/settings/api/keys`, {
      form: { name: 'laptop' },
      origin: ORIGIN,
    });
    expect(created.url).toBe(`${ORIGIN}/dashboard/settings/api`);
    expect(created.body.match(KEY_IN_PAGE)).toHaveLength(1);
    // The browser's reload repeats the last request: the GET the redirect led to.
    const reloaded = await b.open(created.url);
    expect(reloaded.body).toContain('laptop');
    expect(reloaded.body.match(KEY_IN_PAGE)).toBeNull();
    expect(await store.listKeys(accountId)).toHaveLength(1);
    // Nothing of the key is left with the session once it was read.
    expect(store.notices.size).toBe(0);
    // Revoking, too, answers 303 to the page, which shows the key revoked.
    const [record] = await store.listKeys(accountId);
    const revoked = await post(b, `/dashboard/settings/api/keys/${record?.keyId}/revoke`, {});
    expect(revoked.status).toBe(303);
  });

  it('renders a key named <script>alert(1)</script> as text', async () => {
    const { b, post, get } = await signedIn();
    await post(b, '/dashboard/settings/api/keys', { name: '<script>alert(1)</script>' });
    const page = (await get(b, '/dashboard/settings/api')).body;
    expect(page).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(page).not.toContain('<script>alert(1)');
  });

  it(`refuses a key past ${MAX_ACTIVE_KEYS} active ones with a clear message; a revoked one frees a place`, async () => {
    const { b, post, store, accountId } = await signedIn();
    for (let i = 0; i < MAX_ACTIVE_KEYS; i++)
      expect((await post(b, '/dashboard/settings/api/keys', { name: `k${i}` })).status).toBe(303);
    const refused = await post(b, '/dashboard/settings/api/keys', { name: 'one too many' });
    expect(refused.status).toBe(409);
    const page = await refused.text();
    expect(page).toContain(`You already have ${MAX_ACTIVE_KEYS} active keys`);
    expect(page.match(KEY_IN_PAGE)).toBeNull();
    expect(await store.listKeys(accountId)).toHaveLength(MAX_ACTIVE_KEYS);
    const [first] = await store.listKeys(accountId);
    await post(b, `/dashboard/settings/api/keys/${first?.keyId}/revoke`, {});
    expect((await post(b, '/dashboard/settings/api/keys', { name: 'replacement' })).status).toBe(303);
  });

  it('refuses a name with a C0, DEL, C1, separator or bidi control character (400 with the reason, nothing created)', async () => {
    const { b, post, store, accountId } = await signedIn();
    for (const name of [
      'a\tb',
      'a\x7fb',
      'nel\u0085line',
      'csi\u009b31m',
      'a\u2028b',
      'rtl\u202eevil',
      'a\u2066b',
    ]) {
      const refused = await post(b, '/dashboard/settings/api/keys', { name });
      expect(refused.status).toBe(400);
      expect(await refused.text()).toContain('A key name may not contain control characters');
    }
    expect(await store.listKeys(accountId)).toEqual([]);
  });

  it('refuses a blank or overlong name (400, nothing created)', async () => {
    const { b, post, store, accountId } = await signedIn();
    expect((await post(b, '/dashboard/settings/api/keys', { name: '   ' })).status).toBe(400);
    expect((await post(b, '/dashboard/settings/api/keys', { name: 'x'.repeat(129) })).status).toBe(400);
    expect(await store.listKeys(accountId)).toEqual([]);
  });

  it("revokes the account's own key (the API then refuses it); another account's key id is a 404 and stays active", async () => {
    const { b, post, store, signIn, browser, accountId } = await signedIn();
    const other = browser();
    await signIn(other, 'user-2');
    await post(other, '/dashboard/settings/api/keys', { name: 'theirs' });
    const [theirs] = await store.listKeys(accountOf(store, 'user-2'));
    const attempt = await post(b, `/dashboard/settings/api/keys/${theirs?.keyId}/revoke`, {});
    expect(attempt.status).toBe(404);
    expect((await store.findKeyById(theirs?.keyId as string))?.status).toBe('active');
    expect((await post(b, '/dashboard/settings/api/keys/key_doesnotexist/revoke', {})).status).toBe(404);

    await post(b, '/dashboard/settings/api/keys', { name: 'mine' });
    const [mine] = await store.listKeys(accountId);
    const revoked = await b.open(`${ORIGIN}/dashboard/settings/api/keys/${mine?.keyId}/revoke`, {
      form: {},
      origin: ORIGIN,
    });
    expect(revoked.status).toBe(200);
    expect(revoked.body).toContain('Revoked');
    expect((await store.loadPrincipal(mine?.keyHash as string))?.keyStatus).toBe('revoked');
  });
});

describe('Billing', () => {
  it('shows the exact balance and the top-up and refund history', async () => {
    const { b, get, store, accountId } = await signedIn();
    await store.topUp(accountId, 'stripe:pi_123', 12_345_678_901n, '2025-06-01T12:01:00Z');
    await store.removeCredits(accountId, 'stripe-refund:re_1', 2_000_000_000n, '2025-06-01T12:02:00Z');
    const page = (await get(b, '/dashboard/billing')).body;
    expect(page).toContain('$10.345678901');
    expect(page).toContain('stripe:pi_123');
    expect(page).toContain('$12.345678901');
    expect(page).toContain('-$2.00');
    expect(page).toContain('Refund or correction');
  });

  it('sends a fixed amount to Stripe Checkout with the account id, and the browser to its page', async () => {
    const { b, post, stripe, accountId } = await signedIn();
    const response = await post(b, '/dashboard/billing/checkout', { amount: '2500' });
    expect(response.status).toBe(303);
    expect(response.headers.get('location')).toBe('https://checkout.stripe.com/c/pay/cs_test_1');
    expect(stripe.sessions).toHaveLength(1);
    expect(stripe.sessions[0]).toMatchObject({
      mode: 'payment',
      client_reference_id: accountId,
      line_items: [{ price_data: { unit_amount: 2500, currency: 'usd' } }],
      success_url: `${ORIGIN}/dashboard/billing/success?session_id={CHECKOUT_SESSION_ID}`,
      cancel_url: `${ORIGIN}/dashboard/billing`,
    });
  });

  it('takes a custom amount in dollars and cents', async () => {
    const { b, post, stripe } = await signedIn();
    expect((await post(b, '/dashboard/billing/checkout', { amount: 'custom', custom: '12.50' })).status).toBe(
      303,
    );
    expect(stripe.sessions[0]?.line_items?.[0]?.price_data?.unit_amount).toBe(1250);
  });

  for (const custom of ['0', '-5', '4.999', '1e9', 'abc', ''])
    it(`refuses a custom amount of "${custom}" with a clear message and no Stripe call`, async () => {
      const { b, post, stripe } = await signedIn();
      const response = await post(b, '/dashboard/billing/checkout', { amount: 'custom', custom });
      expect(response.status).toBe(400);
      expect(await response.text()).toMatch(/The amount must be[^<]*from \$5\.00 to \$1,000\.00/);
      expect(stripe.sessions).toEqual([]);
    });

  it('refuses a fixed amount that is not one of the buttons (no Stripe call)', async () => {
    const { b, post, stripe } = await signedIn();
    expect((await post(b, '/dashboard/billing/checkout', { amount: '99999999' })).status).toBe(400);
    expect(stripe.sessions).toEqual([]);
  });

  it('the success page says the payment is being confirmed until its top-up is in the ledger, then shows the balance; it credits nothing itself', async () => {
    const { b, get, post, store, stripe, accountId } = await signedIn();
    await post(b, '/dashboard/billing/checkout', { amount: '1000' });
    const calls = store.calls.length;
    const pending = await get(b, '/dashboard/billing/success?session_id=cs_test_1');
    expect(pending.status).toBe(200);
    expect(pending.body).toContain('Your payment of $10.00 is being confirmed');
    expect(pending.body).not.toContain('class="balance"');
    expect(pending.body).toContain('href="/dashboard/billing/success?session_id=cs_test_1"');
    expect((await store.getAccount(accountId))?.balanceNano).toBe(0n);
    expect(await store.listLedger(accountId)).toEqual([]);
    expect(store.calls.slice(calls)).toEqual([]);
    // Paid, but the webhook has not credited it yet: still being confirmed.
    stripe.paid.set('cs_test_1', 'pi_test_1');
    expect((await get(b, '/dashboard/billing/success?session_id=cs_test_1')).body).toContain(
      'being confirmed',
    );
    // The webhook's top-up (functions/payments/events.ts): the balance, with it.
    await store.topUp(accountId, 'stripe:pi_test_1', 10_000_000_000n, new Date().toISOString());
    const credited = await get(b, '/dashboard/billing/success?session_id=cs_test_1');
    expect(credited.body).not.toContain('being confirmed');
    expect(credited.body).toContain('<strong class="balance">$10.00</strong>');
  });
});

describe('CSRF: a change is a POST from the dashboard’s own origin', () => {
  const cases: [string, Record<string, string>][] = [
    ['another origin', { origin: 'https://evil.example' }],
    ['the Function URL host (not the public origin)', { origin: 'https://abc.lambda-url.us-east-1.on.aws' }],
    ['no Origin and a cross-site fetch', { 'sec-fetch-site': 'cross-site' }],
    ['neither Origin nor Sec-Fetch-Site', {}],
  ];
  for (const [what, headers] of cases)
    it(`refuses a key creation from ${what} (403, nothing created)`, async () => {
      const { b, store, accountId } = await signedIn();
      const response = await b.fetch(`${ORIGIN}/dashboard/settings/api/keys`, {
        form: { name: 'csrf' },
        headers,
      });
      expect(response.status).toBe(403);
      expect(await store.listKeys(accountId)).toEqual([]);
    });

  it('accepts a same-origin POST without Origin when Sec-Fetch-Site says same-origin', async () => {
    const { b, store, accountId } = await signedIn();
    const response = await b.fetch(`${ORIGIN}/dashboard/settings/api/keys`, {
      form: { name: 'ok' },
      headers: { 'sec-fetch-site': 'same-origin' },
    });
    expect(response.status).toBe(303);
    expect(await store.listKeys(accountId)).toHaveLength(1);
  });

  it('changes nothing on GET: sign-out, key creation and checkout are POST only', async () => {
    const { b, get, store, stripe, accountId } = await signedIn();
    expect((await get(b, '/dashboard/sign-out')).status).toBe(404);
    expect((await get(b, '/dashboard/settings/api/keys?name=x')).status).toBe(404);
    expect((await get(b, '/dashboard/billing/checkout?amount=1000')).status).toBe(404);
    expect(store.sessions.size).toBe(1);
    expect(await store.listKeys(accountId)).toEqual([]);
    expect(stripe.sessions).toEqual([]);
  });
});

describe('headers and static files', () => {
  it('sends a CSP without inline script, frame-ancestors none, and pages with no inline script', async () => {
    const { b, get } = await signedIn();
    for (const path of ['/dashboard/', '/dashboard/settings/api', '/dashboard/billing']) {
      const page = await get(b, path);
      expect(page.status).toBe(200);
      const csp = page.response.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).toContain("default-src 'none'");
      expect(csp).not.toContain('unsafe-inline');
      expect(csp).toContain("form-action 'self' https://checkout.stripe.com");
      expect(page.response.headers.get('x-frame-options')).toBe('DENY');
      for (const script of page.body.match(/<script[^>]*>[^<]*<\/script>/g) ?? [])
        expect(script).toMatch(/^<script src="\/dashboard\/static\/copy\.js" defer=""><\/script>$/);
      expect(page.body).not.toMatch(/ on[a-z]+="/);
      expect(page.body).not.toContain('style="');
    }
  });

  it('serves its stylesheet and copy script', async () => {
    const { get, browser } = dashboard();
    const css = await get(browser(), '/dashboard/static/style.css');
    expect(css.status).toBe(200);
    expect(css.response.headers.get('content-type')).toBe('text/css; charset=utf-8');
    const js = await get(browser(), '/dashboard/static/copy.js');
    expect(js.response.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.body).toContain('navigator.clipboard');
  });

  it("requires CloudFront's origin header when one is configured", async () => {
    const { browser } = dashboard({ originVerify: ['secret-value'] });
    expect((await browser().fetch(`${ORIGIN}/dashboard/`)).status).toBe(403);
    const through = await browser().fetch(`${ORIGIN}/dashboard/`, {
      headers: { 'x-origin-verify': 'secret-value' },
    });
    expect(through.status).toBe(200);
  });
});
