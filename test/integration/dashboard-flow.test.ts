/**
 * The dashboard end to end over HTTP, as a browser drives it (fetch with a cookie jar, following
 * redirects and submitting forms with their page's Origin): the real dashboard handler (Hono's Lambda
 * adapter) run by the local stack's Function URL emulator behind its CloudFront port (the `/dashboard`
 * behaviours of lib/infra/edge-routes.ts, the origin header added as CloudFront adds it), signing in
 * through the local stack's OpenID provider's own sign-in page (lib/local/oidc.ts: discovery, PKCE,
 * state, nonce, the ID token verified against its JWKS), its sessions and users in the stack's
 * dashboard table, buying credits through the Stripe stand-in whose Pay button sends the signed
 * webhook to the stack's payments function, and the key it shows used on (then refused by) the API.
 *
 * The dashboard acts with its own role's credentials: every DynamoDB call it makes is held to the
 * policy the CDK stack synthesizes for it (lib/local/iam.ts), and a call refused for want of a grant
 * fails this file when the stack stops (test/support/target.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { localPolicies } from '../../lib/local/iam-policies.js';
import type { LocalStack } from '../../lib/local/stack.js';
import type { RunningStripeStandIn } from '../../lib/local/stripe/index.js';
import { Browser, formAction, type Page } from '../support/browser.js';
import { startTarget, type Target } from '../support/target.js';

const CENT = 10_000_000n;
/** A second person at the local provider: invited, accepting, their role changed. */
const TEAMMATE = { email: 'mate@team.example', password: 'mate-pass', subject: 'teammate' };
let target: Target;
let local: LocalStack;
let store: DynamoStore;
let standIn: RunningStripeStandIn;
let oidc: LocalStack['oidc'];
let origin: string;

beforeAll(async () => {
  target = await startTarget({ oidcUsers: [TEAMMATE] });
  local = target.local as LocalStack;
  store = target.admin.store as DynamoStore;
  standIn = local.stripe;
  oidc = local.oidc;
  origin = local.emulator.url;
}, 120_000);

afterAll(async () => {
  await target?.stop();
});

async function signIn(browser: Browser): Promise<Page> {
  const signInPage = await browser.open(`${origin}/dashboard/sign-in`);
  expect(signInPage.url.startsWith(oidc.issuer)).toBe(true);
  return signInAt(browser, signInPage, oidc.user);
}

/** Fills the provider's sign-in page the browser is on. */
const signInAt = (browser: Browser, page: Page, who: { email: string; password: string }) =>
  browser.submit(page, formAction(page.body, /\/interaction\//), {
    email: who.email,
    password: who.password,
  });

const post = (browser: Browser, path: string, form: Record<string, string>) =>
  browser.fetch(`${origin}${path}`, { form, origin });
const apiCall = (key: string) =>
  fetch(`${target.baseUrl}/credits`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status);

describe('the dashboard over HTTP (local OpenID provider, Stripe stand-in, DynamoDB Local)', () => {
  it('signs in, creates a key the API takes, buys $10 once, revokes the key, signs out', async () => {
    const browser = new Browser();
    // Sign-in through the provider's page: a $0 account, no key.
    const home = await signIn(browser);
    expect(local.dashboardUrl).toBe(`${origin}/dashboard/`);
    expect(home.url).toBe(`${origin}/dashboard/`);
    expect(home.status).toBe(200);
    expect(home.body).toContain('$0.00');
    expect(home.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    const accountId = (await store.accountOfUser(oidc.user.subject)) as string;
    expect(await store.getAccount(accountId)).toMatchObject({ status: 'active', balanceNano: 0n });
    expect(await store.listKeys(accountId)).toEqual([]);

    // A key, shown once, taken by the API.
    const created = await browser.open(`${origin}/dashboard/settings/api/keys`, {
      form: { name: '<script>alert(1)</script>' },
      origin,
    });
    const page = created.body;
    expect(created.url).toBe(`${origin}/dashboard/settings/api`);
    expect(page).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    const key = /svc_live_[0-9A-Za-z]{43}/.exec(page)?.[0] as string;
    expect(await apiCall(key)).toBe(200);
    expect((await browser.open(`${origin}/dashboard/settings/api`)).body).not.toContain(key);

    // A bad custom amount: a message, no Checkout Session.
    const sessionsBefore = standIn.stripe.sessions.size;
    const refused = await post(browser, '/dashboard/billing/checkout', { amount: 'custom', custom: 'abc' });
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain('The amount must be');
    expect(standIn.stripe.sessions.size).toBe(sessionsBefore);

    // $10 through Checkout: the stand-in's Pay button, its signed webhook, the success page.
    const buy = await post(browser, '/dashboard/billing/checkout', { amount: '1000' });
    expect(buy.status).toBe(303);
    const checkout = await browser.open(String(buy.headers.get('location')));
    expect(checkout.url.startsWith(standIn.url)).toBe(true);
    const pay = await browser.fetch(new URL(formAction(checkout.body, /./), checkout.url).href, {
      form: { method: 'card' },
      origin: new URL(checkout.url).origin,
    });
    expect(pay.status).toBe(303);
    await standIn.stripe.idle();
    const success = await browser.open(String(pay.headers.get('location')));
    expect(success.url).toMatch(new RegExp(`^${origin}/dashboard/billing/success\\?session_id=cs_`));
    expect(success.body).toContain('$10.00');
    expect((await store.getAccount(accountId))?.balanceNano).toBe(1_000n * CENT);
    // The event again: still $10 once.
    const completed = standIn.stripe.events.filter((e) => e.type === 'checkout.session.completed').at(-1);
    await standIn.stripe.resend(String(completed?.id));
    const billing = await browser.open(`${origin}/dashboard/billing`);
    expect(billing.body).toContain('$10.00');
    expect(billing.body.match(/topup|stripe:pi_/g)?.length).toBe(1);
    expect((await store.getAccount(accountId))?.balanceNano).toBe(1_000n * CENT);

    // A low-balance alert (the balance watch's settings, test/integration/balance-watch.test.ts).
    const alert = await browser.open(`${origin}/dashboard/billing/alert`, {
      form: { threshold: '5' },
      origin,
    });
    expect(alert.url).toBe(`${origin}/dashboard/billing`);
    expect(alert.body).toContain('falls below $5.00');

    // Activity of an account an operator has split: its slices are read together.
    await store.splitAccount(accountId, 2);
    const activity = await browser.open(`${origin}/dashboard/activity`);
    expect(activity.status).toBe(200);
    expect(activity.body).toContain('Activity');

    // Revoked on the page: the next API request with it is a 401.
    const [record] = await store.listKeys(accountId);
    const revoked = await post(browser, `/dashboard/settings/api/keys/${record?.keyId}/revoke`, {});
    expect(revoked.status).toBe(303);
    expect(await apiCall(key)).toBe(401);

    // Sign-out: a copy of the session id taken before is dead.
    const thief = new Browser();
    for (const [name, value] of browser.cookies(origin)) thief.cookies(origin).set(name, value);
    expect((await thief.open(`${origin}/dashboard/settings/api`)).url).toBe(
      `${origin}/dashboard/settings/api`,
    );
    expect((await post(browser, '/dashboard/sign-out', {})).status).toBe(303);
    const after = await thief.fetch(`${origin}/dashboard/settings/api`);
    expect(after.status).toBe(302);

    // Signing in again: the same account, nothing created.
    const again = await signIn(new Browser());
    expect(again.body).toContain('$10.00');
    expect(await store.accountOfUser(oidc.user.subject)).toBe(accountId);
    expect(await store.listKeys(accountId)).toHaveLength(1);
  });

  it("signs out of the identity provider too (Cognito's /logout): the next sign-in in that browser asks for the password", async () => {
    const browser = new Browser();
    await signIn(browser);
    // Signed in at the provider, a sign-in goes through without a password: what sign-out must end,
    // or anyone at a shared computer is signed back in with one click.
    expect((await browser.open(`${origin}/dashboard/sign-in`)).url).toBe(`${origin}/dashboard/`);
    const out = await post(browser, '/dashboard/sign-out', {});
    expect(out.status).toBe(303);
    const logout = new URL(out.headers.get('location') ?? '');
    expect(`${logout.origin}${logout.pathname}`).toBe(`${oidc.issuer}/logout`);
    expect(logout.searchParams.get('client_id')).toBe(oidc.clientId);
    expect(logout.searchParams.get('logout_uri')).toBe(`${origin}/dashboard/`);
    expect((await browser.open(logout.href)).url).toBe(`${origin}/dashboard/`);
    const again = await browser.open(`${origin}/dashboard/sign-in`);
    expect(again.url.startsWith(`${oidc.issuer}/interaction/`)).toBe(true);
    expect(again.body).toContain('type="password"');
    // A logout_uri the client does not allow is refused, not followed.
    const elsewhere = await fetch(
      `${oidc.issuer}/logout?client_id=${oidc.clientId}&logout_uri=${encodeURIComponent('http://evil.example/')}`,
      { redirect: 'manual' },
    );
    expect(elsewhere.status).toBe(400);
  });

  it('refuses a cross-origin POST (403) and answers 403 on the bare Function URL', async () => {
    const browser = new Browser();
    await signIn(browser);
    const accountId = (await store.accountOfUser(oidc.user.subject)) as string;
    const keys = (await store.listKeys(accountId)).length;
    const forged = await browser.fetch(`${origin}/dashboard/settings/api/keys`, {
      form: { name: 'csrf' },
      origin: 'http://evil.example',
    });
    expect(forged.status).toBe(403);
    expect(await store.listKeys(accountId)).toHaveLength(keys);
    const bare = await fetch(`${local.emulator.functionUrls.dashboard}/dashboard/`);
    expect(bare.status).toBe(403);
  });

  it('a teammate: invited, accepts through a sign-in, gets another role; an invitation revoked; all in the audit log', async () => {
    const owner = new Browser();
    await signIn(owner);
    const accountId = (await store.accountOfUser(oidc.user.subject)) as string;
    const invited = await owner.open(`${origin}/dashboard/settings/members/invite`, {
      form: { email: TEAMMATE.email, role: 'developer' },
      origin,
    });
    const link = /value="(http[^"]+\/dashboard\/invite\/[^"]+)"/.exec(invited.body)?.[1] as string;
    expect(link).toBeTruthy();
    const mate = new Browser();
    const offer = await mate.open(link);
    expect(offer.body).toContain('Accept and sign in');
    const provider = await mate.submit(offer, formAction(offer.body, /\/invite\/accept$/), {
      accountId: String(/name="accountId" value="([^"]+)"/.exec(offer.body)?.[1]),
      invitationId: String(/name="invitationId" value="([^"]+)"/.exec(offer.body)?.[1]),
      token: String(/name="token" value="([^"]+)"/.exec(offer.body)?.[1]),
    });
    expect((await signInAt(mate, provider, TEAMMATE)).url).toBe(`${origin}/dashboard/`);
    expect(await store.getMember(accountId, TEAMMATE.subject)).toMatchObject({ role: 'developer' });
    const changed = await post(owner, '/dashboard/settings/members/role', {
      subject: TEAMMATE.subject,
      from: 'developer',
      role: 'viewer',
    });
    expect(changed.status).toBe(303);
    expect((await post(mate, '/dashboard/settings/api/keys', { name: 'x' })).status).toBe(403);
    await owner.open(`${origin}/dashboard/settings/members/invite`, {
      form: { email: 'later@team.example', role: 'viewer' },
      origin,
    });
    const [pending] = await store.listInvitations(accountId, 0);
    const revoked = await post(
      owner,
      `/dashboard/settings/members/invitations/${pending?.invitationId}/revoke`,
      {},
    );
    expect(revoked.status).toBe(303);
    const audit = await owner.open(`${origin}/dashboard/settings/audit`);
    for (const action of ['Member invited', 'Member joined', 'Role changed', 'Invitation revoked'])
      expect(audit.body).toContain(action);
    // Each member's with the client's address (locally, the one the Function URL saw) and User-Agent
    // (the purchase of the first test is Stripe's: no client).
    const { entries } = await store.listAudit(accountId, { limit: 20 });
    const members = entries.filter((e) => e.actor.kind === 'member');
    expect(members.length).toBeGreaterThanOrEqual(6);
    expect(members.filter((e) => e.ip !== '127.0.0.1' || e.userAgent === undefined)).toEqual([]);
  });

  it("needed every DynamoDB permission its role grants, and no other (the stack's policy, as synthesized)", async () => {
    // What the two tests above made the dashboard do, as the IAM layer allowed it, against what the
    // CDK stack grants its role: a grant the flow never needs is one too many.
    const table = (arn: string) =>
      arn.replace(/^arn:aws:dynamodb:[^:]+:\d+:table\/HostedModelApi-sandbox-/, '');
    const used = new Set(
      local.iam
        .allowed()
        .filter((p) => p.principal === 'dashboard')
        .map((p) => `${p.action} ${table(p.resource)}`),
    );
    const granted = new Set(
      (await localPolicies()).principals.dashboard.statements
        .filter((s) => s.effect === 'Allow')
        .flatMap((s) =>
          s.actions
            .filter((a) => a.startsWith('dynamodb:'))
            .flatMap((a) => s.resources.map((r) => `${a} ${table(r)}`)),
        ),
    );
    expect([...used].sort()).toEqual([...granted].sort());
    expect([...granted].sort()).toEqual([
      'dynamodb:BatchGetItem accounts',
      'dynamodb:DeleteItem dashboard',
      'dynamodb:DeleteItem team',
      'dynamodb:GetItem accounts',
      'dynamodb:GetItem dashboard',
      'dynamodb:GetItem keys',
      'dynamodb:GetItem team',
      'dynamodb:PutItem accounts',
      'dynamodb:PutItem audit',
      'dynamodb:PutItem dashboard',
      'dynamodb:PutItem keys',
      'dynamodb:PutItem team',
      'dynamodb:Query audit',
      'dynamodb:Query keys/index/byAccount',
      'dynamodb:Query keys/index/byKeyId',
      'dynamodb:Query ledger',
      'dynamodb:Query team',
      'dynamodb:Query team/index/byMember',
      'dynamodb:UpdateItem accounts',
      'dynamodb:UpdateItem dashboard',
      'dynamodb:UpdateItem keys',
      'dynamodb:UpdateItem team',
    ]);
  });
});
