/** @jsxImportSource hono/jsx */
/**
 * Accepting an invitation. The e-mailed link (GET /invite/<account>/<invitation>/<token>) shows what it
 * is and an Accept button; GET changes nothing. Accepting (a POST, checked against the dashboard's
 * origin like every form: another site cannot make a browser accept) goes through a sign-in at the
 * identity provider, the invitation carried in the sign-in cookie, and back to the callback, which
 * accepts it with the ID token's e-mail: only a verified address (`email_verified`) equal to the
 * invited one is accepted (the store checks the address, the token's hash, the expiry and single use in
 * the one transaction that adds the member). The session then opens that account.
 */
import { timingSafeEqual } from 'node:crypto';
import type { Context, Hono } from 'hono';
import { InvitationError, type InvitationRefusal } from '../core/store-team.js';
import { auditEntry, type Invitation } from '../core/team.js';
import type { DashboardDeps, DashboardEnv } from './deps.js';
import type { SignInChecks } from './oidc.js';
import { Layout, MessagePage } from './pages.js';
import { keepSignIn, startSession } from './sessions.js';
import { actorOf, clientOf, ROLE_NAMES, sha256Hex } from './team-access.js';

type InvitationLink = NonNullable<SignInChecks['invite']>;

/** The parts of a link as the dashboard makes them (anything else is no invitation). */
function linkOf(accountId: unknown, invitationId: unknown, token: unknown): InvitationLink | undefined {
  if (typeof accountId !== 'string' || typeof invitationId !== 'string' || typeof token !== 'string') return;
  if (!/^[A-Za-z0-9_-]{1,100}$/.test(accountId) || !/^inv_[0-9a-f]{24}$/.test(invitationId)) return;
  if (!/^[A-Za-z0-9_-]{43}$/.test(token)) return;
  return { accountId, invitationId, token };
}

const sameHash = (a: string, b: string) =>
  a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/** The invitation a link stands for, while it can be accepted; else undefined. */
async function pending(
  deps: DashboardDeps,
  link: InvitationLink,
  now: Date,
): Promise<Invitation | undefined> {
  const invitation = await deps.store.getInvitation(link.accountId, link.invitationId);
  if (!invitation || !sameHash(invitation.tokenHash, sha256Hex(link.token))) return undefined;
  return invitation.expiresAt > Math.floor(now.getTime() / 1000) ? invitation : undefined;
}

const REFUSALS: Readonly<Record<Exclude<InvitationRefusal, 'already-member'>, [number, string]>> = {
  unknown: [
    404,
    'This invitation is not valid: it was revoked, or the link is incomplete. Ask for a new one.',
  ],
  expired: [410, 'This invitation has expired (they last 7 days): ask for a new one.'],
  used: [410, 'This invitation was used already.'],
  'wrong-email': [
    403,
    'This invitation is for another e-mail address than the one you signed in with. Sign out, then open the link again and sign in with the invited address.',
  ],
};

const refusedPage = (c: Context, status: number, message: string) =>
  c.html(
    <MessagePage
      title="Invitation not accepted"
      message={message}
      signedIn={false}
      link={<a href="/dashboard/">Dashboard</a>}
    />,
    status as 403,
  );

export function inviteRoutes(app: Hono<DashboardEnv>, deps: DashboardDeps, now: () => Date): void {
  app.get('/invite/:accountId/:invitationId/:token', async (c) => {
    const link = linkOf(c.req.param('accountId'), c.req.param('invitationId'), c.req.param('token'));
    const invitation = link ? await pending(deps, link, now()) : undefined;
    if (!link || !invitation)
      return refusedPage(
        c,
        404,
        'This invitation is not valid: it was used, revoked or has expired, or the link is incomplete. Ask for a new one.',
      );
    return c.html(
      <Layout title="Join an account" signedIn={false}>
        <p>
          You are invited to join an account of the API dashboard as{' '}
          <strong>{ROLE_NAMES[invitation.role]}</strong>.
        </p>
        <p>
          The invitation is for <strong>{invitation.email}</strong>: sign in with that address to accept it.
        </p>
        <form method="post" action="/dashboard/invite/accept">
          <input type="hidden" name="accountId" value={link.accountId} />
          <input type="hidden" name="invitationId" value={link.invitationId} />
          <input type="hidden" name="token" value={link.token} />
          <button type="submit">Accept and sign in</button>
        </form>
      </Layout>,
    );
  });

  // A sign-in that carries the invitation to the callback (acceptAtSignIn).
  app.post('/invite/accept', async (c) => {
    const form = await c.req.parseBody();
    const link = linkOf(form.accountId, form.invitationId, form.token);
    if (!link) return refusedPage(c, 400, REFUSALS.unknown[1]);
    const { url, checks } = await (await deps.oidc()).begin();
    keepSignIn(c, { ...checks, invite: link });
    return c.redirect(url.href, 303);
  });
}

/**
 * The callback of an invitation's sign-in: accepts it as the signed-in person (their verified e-mail),
 * then opens a session on that account. Refused: a page saying why, and no session started.
 */
export async function acceptAtSignIn(
  c: Context,
  deps: DashboardDeps,
  link: InvitationLink,
  person: {
    subject: string;
    email?: string | undefined;
    emailVerified?: boolean | undefined;
    authTime?: number | undefined;
  },
  at: Date,
): Promise<Response> {
  const { store } = deps;
  if (!person.email || person.emailVerified !== true)
    return refusedPage(
      c,
      403,
      'Your e-mail address is not verified at the identity provider: verify it, then open the invitation again.',
    );
  const invitation = await store.getInvitation(link.accountId, link.invitationId);
  const actor = actorOf({ subject: person.subject, email: person.email });
  const audit = auditEntry(link.accountId, actor, 'member.joined', at.toISOString(), {
    ...clientOf(c),
    target: person.email,
    details: { invitation: link.invitationId, ...(invitation ? { role: invitation.role } : {}) },
  });
  try {
    await store.acceptInvitation(
      link.accountId,
      link.invitationId,
      sha256Hex(link.token),
      { subject: person.subject, email: person.email },
      at.toISOString(),
      audit,
    );
  } catch (error) {
    if (!(error instanceof InvitationError)) throw error;
    // Already a member (accepted in another tab): the account opens all the same.
    if (error.refusal !== 'already-member') {
      const [status, message] = REFUSALS[error.refusal];
      return refusedPage(c, status, message);
    }
  }
  await deps.watches?.rememberEmail(person.subject, person.email, at.toISOString());
  await startSession(
    c,
    store,
    { accountId: link.accountId, subject: person.subject, authTime: person.authTime },
    at,
  );
  return c.redirect('/dashboard/', 303);
}
