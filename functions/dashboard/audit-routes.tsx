/** @jsxImportSource hono/jsx */
/**
 * GET /dashboard/settings/audit and /dashboard/settings/audit.csv: the session's account's audit log
 * (owners and admins: team-access.tsx), by the same filters and cursor, so the CSV of a page is that
 * page's rows.
 */
import type { Hono } from 'hono';
import type { Store } from '../core/store.js';
import type { AuditAction, AuditQuery } from '../core/team.js';
import { ACTION_NAMES, AUDIT_PAGE, type AuditFilters, AuditPage, auditCsv } from './audit-page.js';
import type { DashboardEnv } from './deps.js';

const DAY = /^\d{4}-\d{2}-\d{2}$/;
const validDay = (day: string | undefined) =>
  day && DAY.test(day) && !Number.isNaN(Date.parse(`${day}T00:00:00Z`)) ? day : undefined;

/** The filters a query asked for, only as far as each is well formed (anything else is no filter). */
function filtersOf(query: (name: string) => string | undefined): AuditFilters {
  const action = query('action');
  const member = query('member');
  const from = validDay(query('from'));
  const to = validDay(query('to'));
  return {
    ...(action && Object.hasOwn(ACTION_NAMES, action) ? { action: action as AuditAction } : {}),
    ...(member && member.length <= 128 ? { member } : {}),
    ...(from ? { from } : {}),
    ...(to ? { to } : {}),
  };
}

/** The day after a UTC day (the `to` date is included: entries before the next day's start). */
const dayAfter = (day: string) => new Date(Date.parse(`${day}T00:00:00Z`) + 86_400_000).toISOString();

/** A cursor is what a previous page's `next` was (the store's: an entry id); anything odd: the first page. */
const cursorOf = (after: string | undefined) =>
  after && /^[A-Za-z0-9:.#_-]{1,200}$/.test(after) ? after : undefined;

function queryOf(filters: AuditFilters, after: string | undefined): AuditQuery {
  return {
    limit: AUDIT_PAGE,
    ...(after ? { after } : {}),
    ...(filters.action ? { actions: [filters.action] } : {}),
    ...(filters.member ? { actorSubject: filters.member } : {}),
    ...(filters.from ? { since: `${filters.from}T00:00:00.000Z` } : {}),
    ...(filters.to ? { until: dayAfter(filters.to) } : {}),
  };
}

export function auditRoutes(routes: Hono<DashboardEnv>, store: Store): void {
  routes.get('/settings/audit', async (c) => {
    const { accountId } = c.var.session;
    const filters = filtersOf((name) => c.req.query(name));
    const after = cursorOf(c.req.query('after'));
    const [page, members] = await Promise.all([
      store.listAudit(accountId, queryOf(filters, after)),
      store.listMembers(accountId),
    ]);
    return c.html(
      <AuditPage
        entries={page.entries}
        members={members}
        filters={filters}
        {...(after ? { after } : {})}
        {...(page.next ? { next: page.next } : {})}
      />,
    );
  });

  routes.get('/settings/audit.csv', async (c) => {
    const { accountId } = c.var.session;
    const filters = filtersOf((name) => c.req.query(name));
    const page = await store.listAudit(accountId, queryOf(filters, cursorOf(c.req.query('after'))));
    c.header('content-type', 'text/csv; charset=utf-8');
    c.header('content-disposition', 'attachment; filename="audit.csv"');
    return c.body(auditCsv(page.entries));
  });
}
