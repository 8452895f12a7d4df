/**
 * The whole role × route matrix of the dashboard: every signed-in route, as every role, over the
 * memory store. Allowed: the route runs (any answer but 401/403). Refused: a 403 page that says why,
 * and for a POST nothing changed (members, invitations, audit log, keys, the balance watch's settings
 * and outbox, Stripe checkouts).
 */
import { describe, expect, it } from 'vitest';
import { ROLES, type Role } from '../../../functions/core/team.js';
import { teamDashboard } from './team-support.js';

type Fixture = { keyId: string; invitationId: string; target: string; accountId: string };
interface Route {
  method: 'GET' | 'POST';
  path: (f: Fixture) => string;
  form?: (f: Fixture) => Record<string, string>;
  allowed: readonly Role[];
}

const EVERYONE = ROLES;
const route = (
  method: Route['method'],
  path: string | ((f: Fixture) => string),
  allowed: readonly Role[],
  form?: (f: Fixture) => Record<string, string>,
): Route => ({
  method,
  path: typeof path === 'string' ? () => path : path,
  allowed,
  ...(form ? { form } : {}),
});

/** Every route the signed-in dashboard has, and who may use it (written out here, not read from the app). */
const ROUTES: Route[] = [
  route('GET', '/dashboard/', EVERYONE),
  route('GET', '/dashboard/settings/api', EVERYONE),
  route('GET', '/dashboard/billing', EVERYONE),
  route('GET', '/dashboard/billing/success?session_id=cs_test_9', EVERYONE),
  route('GET', '/dashboard/billing/profile', EVERYONE),
  route('GET', '/dashboard/billing/invoices', EVERYONE),
  route('GET', '/dashboard/billing/statement', EVERYONE),
  route('GET', '/dashboard/billing/statement/2025-05.csv', EVERYONE),
  route('POST', '/dashboard/billing/profile', ['owner', 'billing'], () => ({ legal_name: 'Acme' })),
  route('GET', '/dashboard/activity', EVERYONE),
  route('GET', '/dashboard/activity.csv', EVERYONE),
  route('GET', '/dashboard/settings/members', EVERYONE),
  route('GET', '/dashboard/settings/audit', ['owner', 'admin']),
  route('GET', '/dashboard/settings/audit.csv', ['owner', 'admin']),
  route('POST', '/dashboard/settings/api/keys', ['owner', 'developer'], () => ({ name: 'new' })),
  route(
    'POST',
    (f) => `/dashboard/settings/api/keys/${f.keyId}/revoke`,
    ['owner', 'developer'],
    () => ({}),
  ),
  route(
    'POST',
    (f) => `/dashboard/settings/api/keys/${f.keyId}/rename`,
    ['owner', 'developer'],
    () => ({
      name: 'renamed',
    }),
  ),
  route(
    'POST',
    (f) => `/dashboard/settings/api/keys/${f.keyId}/cap`,
    ['owner', 'developer'],
    () => ({
      cap: '5',
    }),
  ),
  route('POST', '/dashboard/billing/checkout', ['owner', 'billing'], () => ({ amount: '1000' })),
  route('POST', '/dashboard/billing/alert', ['owner', 'billing'], () => ({ threshold: '5' })),
  route('POST', '/dashboard/billing/auto-top-up', ['owner', 'billing'], () => ({ below: '10', buy: '25' })),
  route('POST', '/dashboard/billing/auto-top-up/card', ['owner', 'billing'], () => ({ buy: '10' })),
  route('POST', '/dashboard/settings/members/invite', ['owner', 'admin'], () => ({
    email: 'new@example.com',
    role: 'viewer',
  })),
  route(
    'POST',
    (f) => `/dashboard/settings/members/invitations/${f.invitationId}/revoke`,
    ['owner', 'admin'],
    () => ({}),
  ),
  route('POST', '/dashboard/settings/members/role', ['owner', 'admin'], (f) => ({
    subject: f.target,
    from: 'viewer',
    role: 'billing',
  })),
  route('POST', '/dashboard/settings/members/remove', ['owner', 'admin'], (f) => ({ subject: f.target })),
  route('POST', '/dashboard/settings/members/transfer', ['owner'], (f) => ({
    to: f.target,
    becomes: 'admin',
  })),
  route('POST', '/dashboard/settings/members/leave', EVERYONE, () => ({})),
  route('POST', '/dashboard/switch-account', EVERYONE, (f) => ({ accountId: f.accountId })),
];

const label = (r: Route) =>
  `${r.method} ${r.path({ keyId: ':keyId', invitationId: ':id', target: '', accountId: '' })}`;

describe('the role × route matrix', () => {
  const cases = ROUTES.flatMap((r) => ROLES.map((role) => [label(r), role, r] as const));
  it.each(cases)('%s as %s', async (_name, role, r) => {
    const t = await teamDashboard({ keyDailyCaps: true });
    const keyId = await t.ownerKey();
    const target = 'target-1';
    await t.join(target, 'viewer');
    await t.invite(t.owner, 'pending@example.com', 'developer');
    const [pending] = await t.store.listInvitations(t.accountId, 0);
    const actor = role === 'owner' ? t.owner : await t.join(`actor-${role}`, role);
    const f = { keyId, invitationId: pending?.invitationId ?? '', target, accountId: t.accountId };
    const before = await t.snapshot();
    const response =
      r.method === 'GET'
        ? await actor.fetch(`${t.ORIGIN}${r.path(f)}`)
        : await t.post(actor, r.path(f), r.form?.(f) ?? {});
    if (r.allowed.includes(role)) {
      expect([401, 403]).not.toContain(response.status);
      return;
    }
    expect(response.status).toBe(403);
    const body = await response.text();
    expect(body).toContain('Not allowed');
    expect(body).toMatch(/Your role on this account is \w+: only/);
    if (r.method === 'POST') expect(await t.snapshot()).toBe(before);
  });

  it('lists every route the dashboard serves behind sign-in (a new route must join the matrix)', async () => {
    const t = await teamDashboard();
    const served = t.app.routes
      .filter((r) => r.method !== 'ALL')
      .map((r) => `${r.method} ${r.path}`)
      .filter((r) => !/\/(static|sign-in|sign-out|callback|invite)\b/.test(r));
    const listed = ROUTES.map((r) =>
      `${r.method} ${r.path({ keyId: ':keyId', invitationId: ':invitationId', target: '', accountId: '' })}`.replace(
        /\?.*$/,
        '',
      ),
    );
    for (const path of served)
      expect(
        listed.map((l) => l.replace(/\/$/, '').replace(/\/statement\/[^/]+$/, '/statement/:file')),
      ).toContain(path.replace(/\/$/, ''));
  });
});
