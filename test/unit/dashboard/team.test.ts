/**
 * A company on the dashboard, in process over the memory store: first sign-ins and users of before
 * teams becoming owners, invitations (e-mailed, bound to the verified address, single use, expiring),
 * a removed member signed out at once, roles taking effect at once, the last owner kept, switching
 * accounts, and no reach into another account by id (IDOR: 404, nothing changed).
 */
import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { SESSION_COOKIE } from '../../../functions/dashboard/sessions.js';
import { accountOf, ORIGIN } from './support.js';
import { teamDashboard } from './team-support.js';

describe('owners', () => {
  it('a first sign-in makes a one-person account, its owner, with an audit entry', async () => {
    const t = await teamDashboard();
    expect(await t.store.listMembers(t.accountId)).toMatchObject([
      { subject: 'owner-1', email: 'owner-1@example.com', role: 'owner' },
    ]);
    const { entries } = await t.store.listAudit(t.accountId, { limit: 10 });
    expect(entries).toMatchObject([{ action: 'member.joined', actor: { subject: 'owner-1' } }]);
  });

  it('a user of before teams (linked to their account, no member) becomes its owner at their next sign-in', async () => {
    const t = await teamDashboard();
    await t.store.createAccount('acct-legacy', 0n, t.clock.now.toISOString());
    await t.store.linkUser('legacy-1', 'acct-legacy');
    const b = t.browser();
    await t.signIn(b, 'legacy-1');
    expect(await t.store.getMember('acct-legacy', 'legacy-1')).toMatchObject({ role: 'owner' });
    expect((await t.get(b, '/dashboard/settings/members')).body).toContain('legacy-1@example.com');
  });
});

describe('invitations', () => {
  it('are e-mailed to the invited address; accepted only by that verified address, once, within 7 days', async () => {
    const t = await teamDashboard();
    const link = await t.invite(t.owner, 'Dev@Example.com', 'developer');
    const [mail] = [...t.watches.outbox.values()];
    expect(mail).toMatchObject({ to: 'dev@example.com', accountId: t.accountId });
    expect(mail?.text).toContain(link);
    const [invitation] = await t.store.listInvitations(t.accountId, 0);
    expect(JSON.stringify(invitation)).not.toContain(link.split('/').at(-1));

    const wrong = t.browser();
    t.oidc.emails.set('someone', 'someone@example.com');
    expect((await t.accept(wrong, link, 'someone')).status).toBe(403);
    expect(await t.store.getMember(t.accountId, 'someone')).toBeUndefined();
    expect(wrong.cookies(ORIGIN).has(SESSION_COOKIE)).toBe(false);

    t.oidc.emails.set('dev', 'dev@example.com');
    t.oidc.unverified.add('dev');
    const dev = t.browser();
    expect((await t.accept(dev, link, 'dev')).status).toBe(403);
    t.oidc.unverified.delete('dev');
    const accepted = await t.accept(dev, link, 'dev');
    expect(accepted.status).toBe(303);
    expect(await t.store.getMember(t.accountId, 'dev')).toMatchObject({ role: 'developer' });
    expect((await t.get(dev, '/dashboard/settings/members')).body).toContain('Your role: <strong>Developer');
    // Used: refused to anyone, its invitee included.
    for (const who of ['dev', 'other'])
      expect([404, 410]).toContain((await t.accept(t.browser(), link, who)).status);

    const late = await t.invite(t.owner, 'late@example.com', 'viewer');
    t.clock.now = new Date(t.clock.now.getTime() + 8 * 86_400_000);
    expect((await t.get(t.browser(), new URL(late).pathname)).status).toBe(404);
  });

  it('pending ones are listed and revoked; a revoked link is refused', async () => {
    const t = await teamDashboard();
    const link = await t.invite(t.owner, 'x@example.com', 'viewer');
    const [invitation] = await t.store.listInvitations(t.accountId, 0);
    const revoked = await t.post(
      t.owner,
      `/dashboard/settings/members/invitations/${invitation?.invitationId}/revoke`,
      {},
    );
    expect(revoked.status).toBe(303);
    expect(await t.store.listInvitations(t.accountId, 0)).toEqual([]);
    expect((await t.accept(t.browser(), link, 'x')).status).toBe(404);
  });
});

describe('members', () => {
  it('a removed member is signed out at their next request; the keys they made keep working', async () => {
    const t = await teamDashboard();
    const dev = await t.join('dev', 'developer');
    expect((await t.post(dev, '/dashboard/settings/api/keys', { name: 'ci' })).status).toBe(303);
    const [key] = await t.store.listKeys(t.accountId);
    expect(key?.createdBy).toEqual({ subject: 'dev', email: 'dev@example.com' });
    expect((await t.get(t.owner, '/dashboard/settings/api')).body).toContain('dev@example.com');
    expect((await t.post(t.owner, '/dashboard/settings/members/remove', { subject: 'dev' })).status).toBe(
      303,
    );
    const next = await t.get(dev, '/dashboard/settings/api');
    expect(next.status).toBe(401);
    expect(next.body).toContain('no longer a member');
    expect(dev.cookies(ORIGIN).has(SESSION_COOKIE)).toBe(false);
    expect(t.store.sessions.size).toBe(1); // the owner's alone
    expect((await t.store.listKeys(t.accountId))[0]?.status).toBe('active');
  });

  it('pages offer only what the role may do: a viewer sees keys and billing without their forms', async () => {
    const t = await teamDashboard();
    const viewer = await t.join('v', 'viewer');
    const keys = (await t.get(viewer, '/dashboard/settings/api')).body;
    expect(keys).not.toContain('action="/dashboard/settings/api/keys"');
    const billing = (await t.get(viewer, '/dashboard/billing')).body;
    expect(billing).not.toContain('<form method="post" action="/dashboard/billing');
    expect(billing).toContain('Balance:');
    const members = (await t.get(viewer, '/dashboard/settings/members')).body;
    expect(members).not.toContain('/dashboard/settings/members/invite');
    expect(members).not.toContain('/dashboard/settings/audit');
    const owner = (await t.get(t.owner, '/dashboard/billing')).body;
    expect(owner).toContain('action="/dashboard/billing/checkout"');
    expect(owner).toContain('action="/dashboard/billing/alert"');
  });

  it('a role change takes effect at the next request', async () => {
    const t = await teamDashboard();
    const dev = await t.join('dev', 'developer');
    const changed = await t.post(t.owner, '/dashboard/settings/members/role', {
      subject: 'dev',
      from: 'developer',
      role: 'viewer',
    });
    expect(changed.status).toBe(303);
    expect((await t.post(dev, '/dashboard/settings/api/keys', { name: 'x' })).status).toBe(403);
    expect(await t.store.listKeys(t.accountId)).toEqual([]);
  });

  it('the last owner cannot leave or be demoted (409, said why); an admin cannot touch an owner (403)', async () => {
    const t = await teamDashboard();
    const left = await t.post(t.owner, '/dashboard/settings/members/leave', {});
    expect(left.status).toBe(409);
    expect(await left.text()).toContain('at least one owner');
    const demoted = await t.post(t.owner, '/dashboard/settings/members/role', {
      subject: 'owner-1',
      from: 'owner',
      role: 'admin',
    });
    expect(demoted.status).toBe(409);
    const admin = await t.join('admin', 'admin');
    const before = await t.snapshot();
    expect((await t.post(admin, '/dashboard/settings/members/remove', { subject: 'owner-1' })).status).toBe(
      403,
    );
    expect(
      (await t.post(admin, '/dashboard/settings/members/invite', { email: 'o@example.com', role: 'owner' }))
        .status,
    ).toBe(403);
    expect(await t.snapshot()).toBe(before);
  });

  it('ownership is transferred; the old owner takes the role they chose', async () => {
    const t = await teamDashboard();
    await t.join('dev', 'developer');
    const moved = await t.post(t.owner, '/dashboard/settings/members/transfer', {
      to: 'dev',
      becomes: 'admin',
    });
    expect(moved.status).toBe(303);
    expect(await t.store.getMember(t.accountId, 'dev')).toMatchObject({ role: 'owner' });
    expect(await t.store.getMember(t.accountId, 'owner-1')).toMatchObject({ role: 'admin' });
  });
});

describe('accounts of one person', () => {
  it('switches between the accounts they belong to, and to no other', async () => {
    const t = await teamDashboard();
    const other = t.browser();
    await t.signIn(other, 'boss-2');
    const second = accountOf(t.store, 'boss-2');
    const link = await t.invite(other, 'owner-1@example.com', 'viewer');
    await t.accept(t.owner, link, 'owner-1'); // the owner of the first, now a viewer of the second
    const home = await t.get(t.owner, '/dashboard/');
    expect(home.body).toContain('action="/dashboard/switch-account"');
    expect(home.body).toContain(`value="${second}" selected`);
    expect((await t.get(t.owner, '/dashboard/settings/members')).body).toContain('Your role: <strong>Viewer');
    const stranger = t.browser();
    await t.signIn(stranger, 'stranger');
    const refused = await t.post(stranger, '/dashboard/switch-account', { accountId: t.accountId });
    expect(refused.status).toBe(404);
    const back = await t.post(t.owner, '/dashboard/switch-account', { accountId: t.accountId });
    expect(back.status).toBe(303);
    expect((await t.get(t.owner, '/dashboard/settings/members')).body).toContain('Your role: <strong>Owner');
  });
});

describe('IDOR: a member of one account acting on another by id', () => {
  it('finds nothing of the other account (404) and changes nothing', async () => {
    const t = await teamDashboard({ keyDailyCaps: true });
    const theirKey = await t.ownerKey('theirs');
    await t.join('their-dev', 'developer');
    await t.invite(t.owner, 'pending@example.com', 'viewer');
    const [theirInvitation] = await t.store.listInvitations(t.accountId, 0);
    const mallory = t.browser();
    await t.signIn(mallory, 'mallory'); // the owner of an account of her own
    const before = await t.snapshot();
    const tries: [string, Record<string, string>][] = [
      [`/dashboard/settings/api/keys/${theirKey}/revoke`, {}],
      [`/dashboard/settings/api/keys/${theirKey}/rename`, { name: 'pwned' }],
      [`/dashboard/settings/api/keys/${theirKey}/cap`, { cap: '1' }],
      [`/dashboard/settings/members/invitations/${theirInvitation?.invitationId}/revoke`, {}],
      ['/dashboard/settings/members/remove', { subject: 'their-dev' }],
      ['/dashboard/settings/members/role', { subject: 'their-dev', from: 'developer', role: 'viewer' }],
      ['/dashboard/settings/members/transfer', { to: 'their-dev', becomes: 'viewer' }],
      ['/dashboard/switch-account', { accountId: t.accountId }],
    ];
    for (const [path, form] of tries)
      expect([path, (await t.post(mallory, path, form)).status]).toEqual([path, 404]);
    expect(await t.snapshot()).toBe(before);
  });
});

describe('the audit log', () => {
  it('shows each change newest first, filters it, and its CSV is quoted and safe from formulas', async () => {
    const t = await teamDashboard();
    const later = () => {
      t.clock.now = new Date(t.clock.now.getTime() + 1_000);
    };
    later();
    await t.owner.fetch(`${ORIGIN}/dashboard/settings/members/invite`, {
      form: { email: '=1+1@example.com', role: 'viewer' },
      origin: ORIGIN,
      headers: { 'user-agent': '=HYPERLINK("x"), "quoted"', 'x-forwarded-for': '203.0.113.7, 10.0.0.1' },
    });
    later();
    await t.ownerKey('ci');
    const page = await t.get(t.owner, '/dashboard/settings/audit');
    expect(page.status).toBe(200);
    const actions = [...page.body.matchAll(/<td data-label="Action">([^<]+)</g)].map((m) => m[1]);
    expect(actions).toEqual(['Key created', 'Member invited', 'Member joined']);
    const filtered = await t.get(t.owner, '/dashboard/settings/audit?action=member.invited');
    expect([...filtered.body.matchAll(/<td data-label="Action">([^<]+)</g)].map((m) => m[1])).toEqual([
      'Member invited',
    ]);
    expect(filtered.body).toContain('203.0.113.7');
    const csv = await t.get(t.owner, '/dashboard/settings/audit.csv?action=member.invited');
    expect(csv.response.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const rows = parse(csv.body, { columns: true }) as Record<string, string>[];
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      action: 'member.invited',
      target: "'=1+1@example.com",
      user_agent: `'=HYPERLINK("x"), "quoted"`,
      ip: '203.0.113.7',
      actor_email: 'owner-1@example.com',
    });
    const none = await t.get(t.owner, '/dashboard/settings/audit?from=2030-01-01');
    expect(none.body).toContain('No entries.');
    // A billing member's alert: its entry names them and the threshold.
    const billing = await t.join('money', 'billing');
    later();
    expect((await t.post(billing, '/dashboard/billing/alert', { threshold: '5' })).status).toBe(303);
    // (The memory watch store keeps the entries it is given apart; DynamoDB writes them to the audit table.)
    expect(t.watches.audits.at(-1)).toMatchObject({
      action: 'alert.changed',
      actor: { subject: 'money', email: 'money@example.com' },
      details: { threshold: '$5.00' },
    });
  });
});
