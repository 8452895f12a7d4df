/** @jsxImportSource hono/jsx */
/**
 * Settings → Audit log: who did what on the account, newest first, 50 a page, filtered by action,
 * member and UTC dates; and the same rows as CSV (RFC 4180 quoting; a cell a spreadsheet would read as
 * a formula is prefixed with an apostrophe). Read by owners and admins (team-access.tsx).
 */
import { stringify } from 'csv-stringify/sync';
import type { AuditAction, AuditEntry, Member } from '../core/team.js';
import { Layout, when } from './pages.js';

export const AUDIT_PAGE = 50;

/** Every action, as the page names it (a Record: a new action does not compile until it is named here). */
export const ACTION_NAMES: Readonly<Record<AuditAction, string>> = {
  'key.created': 'Key created',
  'key.revoked': 'Key revoked',
  'key.renamed': 'Key renamed',
  'key.cap_changed': 'Key cap changed',
  'member.invited': 'Member invited',
  'member.invitation_revoked': 'Invitation revoked',
  'member.joined': 'Member joined',
  'member.role_changed': 'Role changed',
  'member.removed': 'Member removed',
  'member.left': 'Member left',
  'ownership.transferred': 'Ownership transferred',
  'auto_top_up.changed': 'Auto top-up changed',
  'alert.changed': 'Alert changed',
  'billing_profile.changed': 'Billing profile changed',
  purchase: 'Purchase',
  refund: 'Refund',
  dispute: 'Dispute',
};

/** The filters as the page's form and links carry them (dates are UTC days, `YYYY-MM-DD`). */
export interface AuditFilters {
  action?: AuditAction;
  member?: string;
  from?: string;
  to?: string;
}

/** Who did it, in words. */
const who = (entry: AuditEntry) =>
  entry.actor.kind === 'member'
    ? (entry.actor.email ?? entry.actor.subject ?? 'a member')
    : { operator: 'Operator', stripe: 'Stripe', system: 'The service' }[entry.actor.kind];

const detailsOf = (entry: AuditEntry) =>
  Object.entries(entry.details ?? {})
    .map(([name, value]) => `${name}: ${value}`)
    .join('; ');

/** A cell a spreadsheet would take for a formula (`=`, `+`, `-`, `@`, tab, CR) is kept as text. */
const safeCell = (text: string) => (/^[=+\-@\t\r]/.test(text) ? `'${text}` : text);

/** The rows of the page, as CSV: the same entries, every field. */
export function auditCsv(entries: AuditEntry[]): string {
  return stringify(
    entries.map((e) =>
      [
        e.at,
        e.action,
        e.actor.kind,
        e.actor.email ?? '',
        e.actor.subject ?? '',
        e.target ?? '',
        detailsOf(e),
        e.ip ?? '',
        e.userAgent ?? '',
      ].map(safeCell),
    ),
    {
      header: true,
      record_delimiter: 'windows',
      columns: [
        'time_utc',
        'action',
        'actor_kind',
        'actor_email',
        'actor_subject',
        'target',
        'details',
        'ip',
        'user_agent',
      ],
    },
  );
}

/** The query string of the filters (and a cursor), for the CSV link and the next page. */
function filterQuery(filters: AuditFilters, after?: string): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(filters)) if (value) query.set(name, value);
  if (after) query.set('after', after);
  const text = query.toString();
  return text ? `?${text}` : '';
}

export function AuditPage(props: {
  entries: AuditEntry[];
  members: Member[];
  filters: AuditFilters;
  after?: string;
  next?: string;
}) {
  const { filters } = props;
  return (
    <Layout title="Settings → Audit log" signedIn={true}>
      <p class="hint">
        Every change made to the account, by whom, when and from where; kept 400 days. Readable by owners and
        admins.
      </p>
      <form method="get" action="/dashboard/settings/audit" class="inline filters">
        <label for="audit-action">Action</label>
        <select id="audit-action" name="action">
          <option value="">Any</option>
          {Object.entries(ACTION_NAMES).map(([action, name]) => (
            <option value={action} selected={action === filters.action}>
              {name}
            </option>
          ))}
        </select>
        <label for="audit-member">Member</label>
        <select id="audit-member" name="member">
          <option value="">Anyone</option>
          {props.members.map((m) => (
            <option value={m.subject} selected={m.subject === filters.member}>
              {m.email || m.subject}
            </option>
          ))}
        </select>
        <label for="audit-from">From</label>
        <input id="audit-from" name="from" type="date" value={filters.from ?? ''} />
        <label for="audit-to">To</label>
        <input id="audit-to" name="to" type="date" value={filters.to ?? ''} />
        <button type="submit">Filter</button>
      </form>
      <p>
        <a href={`/dashboard/settings/audit.csv${filterQuery(filters, props.after)}`} download="audit.csv">
          Download these rows (CSV)
        </a>
      </p>
      <table class="stack">
        <caption>Audit log, newest first ({props.entries.length} on this page)</caption>
        <thead>
          <tr>
            <th scope="col">Time</th>
            <th scope="col">Who</th>
            <th scope="col">Action</th>
            <th scope="col">Target</th>
            <th scope="col">Details</th>
            <th scope="col">IP address</th>
          </tr>
        </thead>
        <tbody>
          {props.entries.length === 0 ? (
            <tr>
              <td colspan={6}>No entries.</td>
            </tr>
          ) : (
            props.entries.map((e) => (
              <tr>
                <td data-label="Time" class="when">
                  {when(e.at)}
                </td>
                <td data-label="Who">{who(e)}</td>
                <td data-label="Action">{ACTION_NAMES[e.action] ?? e.action}</td>
                <td data-label="Target" class="long">
                  {e.target ?? ''}
                </td>
                <td data-label="Details" class="long">
                  {detailsOf(e)}
                </td>
                <td data-label="IP address">{e.ip ?? ''}</td>
              </tr>
            ))
          )}
        </tbody>
      </table>
      <p>
        {props.after ? <a href={`/dashboard/settings/audit${filterQuery(filters)}`}>Newest</a> : null}{' '}
        {props.next ? (
          <a href={`/dashboard/settings/audit${filterQuery(filters, props.next)}`}>Older entries</a>
        ) : null}
      </p>
    </Layout>
  );
}
