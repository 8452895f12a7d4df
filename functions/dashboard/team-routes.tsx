/** @jsxImportSource hono/jsx */
/**
 * Settings → Members and the account switcher: invite (an e-mailed, expiring, single-use link bound to
 * the address), revoke an invitation, change a role, remove a member, transfer ownership, leave, and
 * switch to another account of the person's. Each route's permission is checked before it runs
 * (team-access.tsx); here, what depends on the member acted on: only an owner changes, removes or
 * invites an owner. Every change is the store's one transaction with its audit entry; the store
 * refuses what would leave the account without an owner ('last-owner': a 409 saying so). Members and
 * invitations are looked up within the session's account only: another account's are not found (404).
 */
import { randomBytes } from 'node:crypto';
import type { Context, Hono } from 'hono';
import { MemberChangeError, type MemberRefusal } from '../core/store-team.js';
import { can, INVITATION_TTL_SECONDS, type Invitation, isRole, type Role } from '../core/team.js';
import type { NewMessage } from '../core/watch.js';
import type { DashboardDeps, DashboardEnv } from './deps.js';
import { MembersPage } from './members-page.js';
import { MessagePage } from './pages.js';
import { endSession, redirectAfterPost, startSession, takeNotice } from './sessions.js';
import { auditOf, forbidden, ROLE_NAMES, sha256Hex } from './team-access.js';

const MEMBERS_PATH = '/dashboard/settings/members';

/** An e-mail address as an invitation takes it (lower-cased): one @, no spaces, a dot in the domain. */
const EMAIL = /^[^\s@<>"]{1,64}@[^\s@<>"]+\.[^\s@<>"]{2,}$/;

/** What each refusal of the store tells the member, and its status. */
const REFUSALS: Readonly<Record<MemberRefusal, { status: 404 | 409; message: string }>> = {
  'last-owner': {
    status: 409,
    message:
      'An account must keep at least one owner: make another member an owner (or transfer ownership) first. Nothing was changed.',
  },
  'not-found': { status: 404, message: 'There is no such member or invitation on this account.' },
  changed: {
    status: 409,
    message: "Someone changed this member's role meanwhile: look at the list again. Nothing was changed.",
  },
  'already-member': { status: 409, message: 'That person is a member of this account already.' },
};

/** The invitation's e-mail: who invited them, to which role, the link, and that it is theirs alone. */
function invitationMessage(
  to: string,
  from: string,
  role: Role,
  link: string,
  expiresAt: string,
): NewMessage {
  return {
    to,
    subject: 'You are invited to an account of the API dashboard',
    text: [
      `${from || 'A member'} invited ${to} to join their account on the API dashboard as ${ROLE_NAMES[role]}.`,
      '',
      `Accept it here (sign in with ${to}): ${link}`,
      '',
      `The link works once, for this address only, until ${expiresAt}. If you did not expect it, ignore this e-mail.`,
    ].join('\n'),
  };
}

const text = (form: Record<string, unknown>, name: string, max = 256) =>
  typeof form[name] === 'string' ? (form[name] as string).trim().slice(0, max) : '';

export function teamRoutes(routes: Hono<DashboardEnv>, deps: DashboardDeps, now: () => Date): void {
  const { store } = deps;

  const page = async (
    c: Context<DashboardEnv>,
    extra: { invited?: { email: string; link: string }; done?: string; error?: string } = {},
  ) => {
    const { accountId } = c.var.session;
    const [members, invitations] = await Promise.all([
      store.listMembers(accountId),
      store.listInvitations(accountId, Math.floor(now().getTime() / 1000)),
    ]);
    return <MembersPage me={c.var.member} members={members} invitations={invitations} {...extra} />;
  };
  const refused = async (c: Context<DashboardEnv>, status: 400 | 404 | 409, error: string) =>
    c.html(await page(c, { error }), status);
  /** Runs a change; the store's refusal (nothing written) becomes the page with why. */
  const attempt = async (c: Context<DashboardEnv>, change: () => Promise<unknown>, done: string) => {
    try {
      await change();
    } catch (error) {
      if (!(error instanceof MemberChangeError)) throw error;
      const { status, message } = REFUSALS[error.refusal];
      return refused(c, status, message);
    }
    return redirectAfterPost(c, store, c.var.session, MEMBERS_PATH, now(), { done });
  };

  routes.get('/settings/members', async (c) => {
    const { accountId } = c.var.session;
    const [notice, members, invitations] = await Promise.all([
      takeNotice(store, c.var.session, now()),
      store.listMembers(accountId),
      store.listInvitations(accountId, Math.floor(now().getTime() / 1000)),
    ]);
    return c.html(
      <MembersPage
        me={c.var.member}
        members={members}
        invitations={invitations}
        {...(notice?.invited ? { invited: notice.invited } : {})}
        {...(notice?.done ? { done: notice.done } : {})}
      />,
    );
  });

  routes.post('/settings/members/invite', async (c) => {
    const { member } = c.var;
    const form = await c.req.parseBody();
    const email = text(form, 'email', 300).toLowerCase();
    const role = form.role;
    if (email.length > 254 || !EMAIL.test(email))
      return refused(c, 400, 'Type the e-mail address of the person to invite.');
    if (!isRole(role)) return refused(c, 400, 'Choose one of the roles.');
    if (role === 'owner' && !can(member.role, 'owners')) return forbidden(c, member.role, 'owners');
    const at = now().toISOString();
    const token = randomBytes(32).toString('base64url');
    const invitation: Invitation = {
      accountId: member.accountId,
      invitationId: `inv_${randomBytes(12).toString('hex')}`,
      tokenHash: sha256Hex(token),
      email,
      role,
      invitedBy: member.subject,
      createdAt: at,
      expiresAt: Math.floor(now().getTime() / 1000) + INVITATION_TTL_SECONDS,
    };
    const audit = auditOf(c, 'member.invited', at, {
      target: email,
      details: { role, invitation: invitation.invitationId },
    });
    try {
      await store.createInvitation(invitation, audit);
    } catch (error) {
      if (!(error instanceof MemberChangeError)) throw error;
      const { status, message } = REFUSALS[error.refusal];
      return refused(c, status, message);
    }
    const link = `${deps.publicOrigin}/dashboard/invite/${invitation.accountId}/${invitation.invitationId}/${token}`;
    const expires = new Date(invitation.expiresAt * 1000).toISOString();
    // Sent by the balance watch's outbox (SES), to the invited address.
    await deps.watches?.queueMessage(
      member.accountId,
      invitationMessage(email, member.email, role, link, expires),
      at,
    );
    return redirectAfterPost(c, store, c.var.session, MEMBERS_PATH, now(), { invited: { email, link } });
  });

  routes.post('/settings/members/invitations/:invitationId/revoke', async (c) => {
    const { member } = c.var;
    const invitationId = c.req.param('invitationId');
    const invitation = await store.getInvitation(member.accountId, invitationId);
    if (!invitation) return refused(c, 404, REFUSALS['not-found'].message);
    if (invitation.role === 'owner' && !can(member.role, 'owners'))
      return forbidden(c, member.role, 'owners');
    const audit = auditOf(c, 'member.invitation_revoked', now().toISOString(), {
      target: invitation.email,
      details: { role: invitation.role, invitation: invitationId },
    });
    return attempt(
      c,
      () => store.revokeInvitation(member.accountId, invitationId, audit),
      `The invitation of ${invitation.email} was revoked.`,
    );
  });

  routes.post('/settings/members/role', async (c) => {
    const { member } = c.var;
    const form = await c.req.parseBody();
    const to = form.role;
    if (!isRole(to)) return refused(c, 400, 'Choose one of the roles.');
    const target = await store.getMember(member.accountId, text(form, 'subject'));
    if (!target) return refused(c, 404, REFUSALS['not-found'].message);
    const from = isRole(form.from) ? form.from : target.role;
    if ((from === 'owner' || target.role === 'owner' || to === 'owner') && !can(member.role, 'owners'))
      return forbidden(c, member.role, 'owners');
    if (from === to) return redirectAfterPost(c, store, c.var.session, MEMBERS_PATH, now());
    const audit = auditOf(c, 'member.role_changed', now().toISOString(), {
      target: target.email || target.subject,
      details: { role: `${from} -> ${to}` },
    });
    return attempt(
      c,
      () => store.changeRole(member.accountId, target.subject, from, to, audit),
      `${target.email || target.subject} is now ${ROLE_NAMES[to]}.`,
    );
  });

  routes.post('/settings/members/remove', async (c) => {
    const { member } = c.var;
    const target = await store.getMember(member.accountId, text(await c.req.parseBody(), 'subject'));
    if (!target) return refused(c, 404, REFUSALS['not-found'].message);
    if (target.subject === member.subject)
      return refused(c, 400, 'To leave the account yourself, use "Leave account" below.');
    if (target.role === 'owner' && !can(member.role, 'owners')) return forbidden(c, member.role, 'owners');
    const audit = auditOf(c, 'member.removed', now().toISOString(), {
      target: target.email || target.subject,
      details: { role: target.role },
    });
    return attempt(
      c,
      () => store.removeMember(member.accountId, target.subject, audit),
      `${target.email || target.subject} was removed: they are signed out of this account at their next request.`,
    );
  });

  routes.post('/settings/members/transfer', async (c) => {
    const { member } = c.var;
    const form = await c.req.parseBody();
    const becomes = form.becomes;
    if (!isRole(becomes) || becomes === 'owner') return refused(c, 400, 'Choose the role you take instead.');
    const target = await store.getMember(member.accountId, text(form, 'to'));
    if (!target || target.subject === member.subject)
      return refused(c, 404, 'Choose a member of this account to become its owner.');
    const audit = auditOf(c, 'ownership.transferred', now().toISOString(), {
      target: target.email || target.subject,
      details: { from: member.email || member.subject, fromBecomes: becomes },
    });
    return attempt(
      c,
      () => store.transferOwnership(member.accountId, member.subject, target.subject, becomes, audit),
      `${target.email || target.subject} is now an owner; you are ${ROLE_NAMES[becomes]}.`,
    );
  });

  // Leaving: the member's own removal; then the session moves to another account of theirs, if any.
  routes.post('/settings/members/leave', async (c) => {
    const { member, session } = c.var;
    const audit = auditOf(c, 'member.left', now().toISOString(), { target: member.email || member.subject });
    try {
      await store.removeMember(member.accountId, member.subject, audit);
    } catch (error) {
      if (!(error instanceof MemberChangeError)) throw error;
      const { status, message } = REFUSALS[error.refusal];
      return refused(c, status, message);
    }
    const other = (await store.membershipsOf(member.subject)).find((m) => m.accountId !== member.accountId);
    if (!other) {
      await endSession(c, store);
      return c.redirect('/dashboard/', 303);
    }
    await startSession(
      c,
      store,
      { accountId: other.accountId, subject: member.subject, authTime: session.authTime },
      now(),
    );
    return c.redirect('/dashboard/', 303);
  });

  // The header's switcher: to another account the person is a member of (checked: else a 404, and the
  // session stays where it was). A new session id for the other account, the sign-in's time kept.
  routes.post('/switch-account', async (c) => {
    const { session } = c.var;
    const accountId = text(await c.req.parseBody(), 'accountId', 100);
    const there = accountId ? await store.getMember(accountId, session.subject) : undefined;
    if (!there)
      return c.html(
        <MessagePage title="Not found" message="You are not a member of that account." signedIn={true} />,
        404,
      );
    await startSession(c, store, { accountId, subject: session.subject, authTime: session.authTime }, now());
    return c.redirect('/dashboard/', 303);
  });
}
