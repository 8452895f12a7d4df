/** @jsxImportSource hono/jsx */
/**
 * Settings → Members: who can use the account and with which role, the invitations still pending, and
 * the forms to invite, change a role, remove, transfer ownership and leave. A form is shown only to a
 * role that may use it (team-access.tsx checks it on the server whatever the page showed).
 */
import { type Invitation, type Member, ROLES, type Role } from '../core/team.js';
import { allowed, ConfirmAction, Layout, when } from './pages.js';
import { ROLE_NAMES } from './team-access.js';

/** What each role may do, as the page explains it. */
const ROLE_HELP: Readonly<Record<Role, string>> = {
  owner: 'everything, including owners and ownership',
  admin: 'invites and manages members other than owners; reads the audit log',
  billing: 'buys credit, manages alerts and auto top-up',
  developer: 'creates, renames and revokes API keys',
  viewer: 'sees the account, changes nothing',
};

function RoleOptions(props: { selected?: Role; withOwner: boolean }) {
  return (
    <>
      {ROLES.filter((role) => props.withOwner || role !== 'owner').map((role) => (
        <option value={role} selected={role === props.selected}>
          {ROLE_NAMES[role]}
        </option>
      ))}
    </>
  );
}

/** The role and remove forms of a member the signed-in member may manage (not themselves). */
function MemberActions(props: { member: Member; owners: boolean }) {
  const { member } = props;
  const id = member.subject.replace(/[^A-Za-z0-9_-]/g, '_');
  return (
    <div class="actions">
      <form method="post" action="/dashboard/settings/members/role" class="inline">
        <input type="hidden" name="subject" value={member.subject} />
        <input type="hidden" name="from" value={member.role} />
        <label for={`role-${id}`} class="visually-hidden">
          New role for {member.email}
        </label>
        <select id={`role-${id}`} name="role">
          <RoleOptions selected={member.role} withOwner={props.owners} />
        </select>
        <button type="submit">Change role</button>
      </form>
      <ConfirmAction
        action="/dashboard/settings/members/remove"
        label="Remove"
        name={`Remove ${member.email}`}
        question={`Remove ${member.email} from this account? Their sessions end at once; the account's keys keep working.`}
        confirm="Yes, remove"
      >
        <input type="hidden" name="subject" value={member.subject} />
      </ConfirmAction>
    </div>
  );
}

export function MembersPage(props: {
  me: Member;
  members: Member[];
  invitations: Invitation[];
  invited?: { email: string; link: string };
  done?: string;
  error?: string;
}) {
  const { me } = props;
  const manage = allowed('members');
  const owners = allowed('owners');
  const mayManage = (m: Member) => manage && m.subject !== me.subject && (m.role !== 'owner' || owners);
  const others = props.members.filter((m) => m.subject !== me.subject);
  return (
    <Layout title="Settings → Members" signedIn={true}>
      {props.invited ? (
        <section class="notice" aria-live="polite">
          <h2>Invitation sent to {props.invited.email}</h2>
          <p>
            It is e-mailed to them, valid 7 days and only for that address. Should the e-mail not arrive, send
            them this link yourself (shown this once):
          </p>
          <p class="copy">
            <input id="invite-link" readonly value={props.invited.link} aria-label="Invitation link" />
            <button type="button" data-copy="invite-link">
              Copy
            </button>
          </p>
        </section>
      ) : null}
      {props.done ? (
        <p class="notice" role="status">
          {props.done}
        </p>
      ) : null}
      {props.error ? (
        <p class="error" role="alert">
          {props.error}
        </p>
      ) : null}
      <p>
        Your role: <strong>{ROLE_NAMES[me.role]}</strong> ({ROLE_HELP[me.role]}).
      </p>
      <table class="stack">
        <caption>Members</caption>
        <thead>
          <tr>
            <th scope="col">E-mail</th>
            <th scope="col">Role</th>
            <th scope="col">Joined</th>
            <th scope="col">
              <span class="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {props.members.map((m) => (
            <tr>
              <td data-label="E-mail">
                {m.email || m.subject}
                {m.subject === me.subject ? ' (you)' : ''}
              </td>
              <td data-label="Role">{ROLE_NAMES[m.role]}</td>
              <td data-label="Joined" class="when">
                {when(m.joinedAt)}
              </td>
              <td>{mayManage(m) ? <MemberActions member={m} owners={owners} /> : null}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {manage ? (
        <section>
          <h2>Invite someone</h2>
          <form method="post" action="/dashboard/settings/members/invite" class="inline">
            <label for="invite-email">E-mail</label>
            <input id="invite-email" name="email" type="email" required maxlength={254} />
            <label for="invite-role">Role</label>
            <select id="invite-role" name="role">
              <RoleOptions selected="developer" withOwner={owners} />
            </select>
            <button type="submit">Send invitation</button>
          </form>
          <ul class="hint">
            {ROLES.map((role) => (
              <li>
                {ROLE_NAMES[role]}: {ROLE_HELP[role]}
              </li>
            ))}
          </ul>
        </section>
      ) : null}
      <table class="stack">
        <caption>Pending invitations</caption>
        <thead>
          <tr>
            <th scope="col">E-mail</th>
            <th scope="col">Role</th>
            <th scope="col">Expires</th>
            <th scope="col">
              <span class="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {props.invitations.length === 0 ? (
            <tr>
              <td colspan={4}>None.</td>
            </tr>
          ) : (
            props.invitations.map((invitation) => (
              <tr>
                <td data-label="E-mail">{invitation.email}</td>
                <td data-label="Role">{ROLE_NAMES[invitation.role]}</td>
                <td data-label="Expires" class="when">
                  {when(new Date(invitation.expiresAt * 1000).toISOString())}
                </td>
                <td>
                  {manage && (invitation.role !== 'owner' || owners) ? (
                    <ConfirmAction
                      action={`/dashboard/settings/members/invitations/${invitation.invitationId}/revoke`}
                      label="Revoke"
                      name={`Revoke the invitation of ${invitation.email}`}
                      question={`Revoke the invitation of ${invitation.email}? Its link stops working.`}
                      confirm="Yes, revoke it"
                    />
                  ) : null}
                </td>
              </tr>
            ))
          )}
        </tbody>
      </table>
      {owners && others.length > 0 ? (
        <section>
          <h2>Transfer ownership</h2>
          <form method="post" action="/dashboard/settings/members/transfer" class="inline">
            <label for="transfer-to">New owner</label>
            <select id="transfer-to" name="to">
              {others.map((m) => (
                <option value={m.subject}>{m.email || m.subject}</option>
              ))}
            </select>
            <label for="transfer-becomes">You become</label>
            <select id="transfer-becomes" name="becomes">
              <RoleOptions selected="admin" withOwner={false} />
            </select>
            <button type="submit">Transfer</button>
          </form>
        </section>
      ) : null}
      <section>
        <h2>Leave this account</h2>
        <p class="hint">
          You lose access to it at once; its keys keep working. An account's last owner cannot leave: make
          someone else owner first.
        </p>
        <ConfirmAction
          action="/dashboard/settings/members/leave"
          label="Leave account"
          question="Leave this account? You lose access to it at once; only a member who can invite can bring you back."
          confirm="Yes, leave"
        />
      </section>
    </Layout>
  );
}
