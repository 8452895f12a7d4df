/** @jsxImportSource hono/jsx */
/**
 * Who may do what on the dashboard, checked on the server at every signed-in request (pages only hide
 * what a role cannot do; this is what counts). The session's member is read at every request,
 * strongly consistently: a person removed from the account is signed out at their next request, and a
 * role changed takes effect at once. Then the route's permission (team.ts `can`): a role without it
 * gets a 403 page and, for a POST, nothing is done (the route's handler never runs).
 *
 * Every change a member makes is recorded with an audit entry built here (auditOf): the member as its
 * actor, the time, the client's IP address and User-Agent; the store writes it in the same transaction
 * as the change.
 */
import { createHash } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import type { DashboardSession, Store } from '../core/store.js';
import {
  type Actor,
  type AuditAction,
  type AuditEntry,
  auditEntry,
  can,
  type Member,
  type Permission,
} from '../core/team.js';
import type { DashboardEnv } from './deps.js';
import { MessagePage } from './pages.js';
import { currentSession, endSession } from './sessions.js';

/**
 * The signed-in POSTs (paths under /dashboard) and the permission each needs. A POST not listed here is
 * refused (403): a new form must be added to this table to work at all.
 */
const POSTS: readonly (readonly [RegExp, Permission])[] = [
  [/^\/settings\/api\/keys$/, 'keys'],
  [/^\/settings\/api\/keys\/[^/]+\/(revoke|rename|cap)$/, 'keys'],
  [/^\/billing\/(checkout|alert|auto-top-up|auto-top-up\/card|profile)$/, 'billing'],
  [/^\/settings\/members\/(invite|role|remove)$/, 'members'],
  [/^\/settings\/members\/invitations\/[^/]+\/revoke$/, 'members'],
  [/^\/settings\/members\/transfer$/, 'owners'],
  // Leaving and switching accounts: any member, for themselves only.
  [/^\/settings\/members\/leave$/, 'read'],
  [/^\/switch-account$/, 'read'],
];

/**
 * The signed-in GETs that need more than `read`: the audit log (page and CSV), for the owners and admins
 * who manage the members it names (it holds every member's e-mail and IP addresses).
 */
const GETS: readonly (readonly [RegExp, Permission])[] = [[/^\/settings\/audit(\.csv)?$/, 'members']];

/** The permission a signed-in request needs (`path` under /dashboard), or undefined: refused whatever the role. */
function permissionFor(method: string, path: string): Permission | undefined {
  const table = method === 'GET' || method === 'HEAD' ? GETS : POSTS;
  const found = table.find(([pattern]) => pattern.test(path))?.[1];
  return found ?? (table === GETS ? 'read' : undefined);
}

/** SHA-256 (hex): what the store keeps of an invitation's token. */
export const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');

/** What each role is called on the pages. */
export const ROLE_NAMES: Readonly<Record<Member['role'], string>> = {
  owner: 'Owner',
  admin: 'Admin',
  billing: 'Billing',
  developer: 'Developer',
  viewer: 'Viewer',
};

/** What the 403 page says each permission is for. */
const NEEDS: Readonly<Record<Permission, string>> = {
  read: 'a member of the account',
  keys: 'an owner or a developer (they manage the API keys)',
  billing: 'an owner or a billing member (they manage payments, alerts and auto top-up)',
  members: 'an owner or an admin (they manage the members and read the audit log)',
  owners: 'an owner',
};

/** The 403 page (nothing was done). */
export function forbidden(c: Context, role: Member['role'], needed: Permission | undefined) {
  const message = needed
    ? `Your role on this account is ${ROLE_NAMES[role]}: only ${NEEDS[needed]} can do this. Nothing was changed.`
    : 'This cannot be done from the dashboard. Nothing was changed.';
  return c.html(<MessagePage title="Not allowed" message={message} signedIn={true} />, 403);
}

/**
 * The request's session and its member, or why there is none: no live session, or 'removed' (the
 * person is not a member of the session's account any more: the session is ended here, at once).
 * With `memberships`, the person's accounts too (the header's switcher), read beside the member.
 */
export async function sessionMember(
  c: Context,
  store: Store,
  now: Date,
  options: { memberships?: boolean; session?: DashboardSession } = {},
): Promise<{ session: DashboardSession; member: Member; memberships?: Member[] } | 'removed' | undefined> {
  const session = options.session ?? (await currentSession(c, store, now));
  if (!session) return undefined;
  const [member, memberships] = await Promise.all([
    store.getMember(session.accountId, session.subject),
    options.memberships ? store.membershipsOf(session.subject) : undefined,
  ]);
  if (member) return { session, member, ...(memberships ? { memberships } : {}) };
  await endSession(c, store);
  return 'removed';
}

/** The answer to a request whose session ended (or never was). */
function signedOut(c: Context, removed: boolean) {
  if (!removed && c.req.method === 'GET') return c.redirect('/dashboard/sign-in', 302);
  const message = removed
    ? 'You are no longer a member of this account, so you were signed out.'
    : 'Your session has ended: sign in again.';
  return c.html(
    <MessagePage
      title="Signed out"
      message={message}
      signedIn={false}
      link={<a href="/dashboard/sign-in">Sign in</a>}
    />,
    401,
  );
}

/** The signed-in routes' gate: a live session, its member read now, and the route's permission. */
export function signedInMember(store: Store, now: () => Date): MiddlewareHandler<DashboardEnv> {
  return async (c, next) => {
    // The header's account switcher, on pages only (a GET).
    const found = await sessionMember(c, store, now(), { memberships: c.req.method === 'GET' });
    if (found === undefined || found === 'removed') return signedOut(c, found === 'removed');
    const { session, member, memberships } = found;
    c.set('session', session);
    c.set('member', member);
    if (memberships) c.set('memberships', memberships);
    const needed = permissionFor(c.req.method, c.req.path.replace(/^\/dashboard/, ''));
    if (!needed || !can(member.role, needed)) return forbidden(c, member.role, needed);
    return next();
  };
}

/** A member as the audit log names them. */
export const actorOf = (member: Pick<Member, 'subject' | 'email'>): Actor => ({
  kind: 'member',
  subject: member.subject,
  ...(member.email ? { email: member.email } : {}),
});

/**
 * The client's IP address: CloudFront's `CloudFront-Viewer-Address` (`<ip>:<port>`), which CloudFront
 * sets itself and the dashboard's behaviour forwards (all viewer headers); without CloudFront (locally),
 * the first address of `X-Forwarded-For`, else the address the Function URL saw. Behind CloudFront
 * X-Forwarded-For is not used: a Function URL keeps only its leftmost address, which the client wrote.
 */
function clientIp(c: Context): string | undefined {
  const viewer = c.req.header('cloudfront-viewer-address');
  const lambda = (c.env as { requestContext?: { http?: { sourceIp?: string } } } | undefined)?.requestContext;
  const ip = viewer
    ? viewer.replace(/:\d+$/, '')
    : (c.req.header('x-forwarded-for')?.split(',')[0]?.trim() ?? lambda?.http?.sourceIp);
  return ip ? ip.slice(0, 64) : undefined;
}

/** The client of a request as an audit entry keeps it: IP address and User-Agent (at most 256 characters). */
export function clientOf(c: Context): Pick<AuditEntry, 'ip' | 'userAgent'> {
  const ip = clientIp(c);
  const userAgent = c.req.header('user-agent')?.slice(0, 256);
  return { ...(ip ? { ip } : {}), ...(userAgent ? { userAgent } : {}) };
}

/** The audit entry of a change the signed-in member makes now. */
export function auditOf(
  c: Context<DashboardEnv>,
  action: AuditAction,
  at: string,
  more: Pick<AuditEntry, 'target' | 'details'> = {},
): AuditEntry {
  const { member } = c.var;
  return auditEntry(member.accountId, actorOf(member), action, at, { ...clientOf(c), ...more });
}
