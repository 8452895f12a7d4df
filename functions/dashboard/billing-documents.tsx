/** @jsxImportSource hono/jsx */
/**
 * Billing's documents, for the session's account only (the session middleware of pages-routes.tsx
 * runs first, as for every /billing path):
 *
 *   GET  /dashboard/billing/profile         the billing profile's form
 *   POST /dashboard/billing/profile         saved on the account's Stripe Customer (made if none);
 *                                           a mistake is a 400 with the form and why, never a 500
 *   GET  /dashboard/billing/invoices        its invoices, each with its PDF and Stripe's page
 *   GET  /dashboard/billing/statement       this month's statement
 *   GET  /dashboard/billing/statement/<YYYY-MM>       the month's statement, printable
 *   GET  /dashboard/billing/statement/<YYYY-MM>.csv   the same as CSV
 *
 * The account's Customer is the one remembered in the store, else the one its saved card was saved
 * to, else the one Stripe's search finds by the account's id (an account from before it was
 * remembered), each while Stripe still has it; found so, or made to save the profile, it is remembered
 * (payments/account-customer.ts): search lags Stripe's writes, so a Customer just made by Checkout or
 * by this form is found at once. Each Stripe call is a round trip the page waits on: the profile is
 * one (the remembered Customer retrieved with its tax IDs) and the invoices one (listed by the
 * remembered id, a Customer deleted since included), while the remembered Customer is there; the
 * lookup further on only past it. Without the invoicing port, the profile and invoices are 404s.
 */
import type { Context, Hono } from 'hono';
import { InvalidMonthError, monthBounds, monthlyStatement, monthOf } from '../billing/statement.js';
import {
  type CustomerLookup,
  ensureAccountCustomer,
  listAccountInvoices,
  readAccountProfile,
} from '../payments/account-customer.js';
import type { BillingProfile } from '../payments/billing-profile.js';
import type { InvoicingApi } from '../payments/invoicing.js';
import { InvoicesPage, ProfilePage, type ProfileView } from './billing-profile.js';
import type { DashboardDeps, DashboardEnv } from './deps.js';
import { MessagePage } from './pages.js';
import { BillingProfileError, profileFromForm } from './profile-form.js';
import { StatementPage, statementCsv } from './statement-page.js';
import { auditOf } from './team-access.js';

const PROFILE_PATH = '/dashboard/billing/profile';
const EMPTY: BillingProfile = { contacts: [], taxIds: [] };

/** Stripe's refusal of what the customer typed (400 `invalid_request_error`: a tax ID it rejects). */
function stripeRefusal(error: unknown): string | undefined {
  const { statusCode, type, message } = (error ?? {}) as {
    statusCode?: unknown;
    type?: unknown;
    message?: unknown;
  };
  if (statusCode !== 400 || type !== 'StripeInvalidRequestError' || typeof message !== 'string')
    return undefined;
  return `Stripe refused it: ${message}`;
}

export function billingDocumentRoutes(
  routes: Hono<DashboardEnv>,
  deps: DashboardDeps,
  now: () => Date,
): void {
  const { store } = deps;
  const month = () => monthOf(now().toISOString());
  const notFound = (c: Context<DashboardEnv>, message: string) =>
    c.html(<MessagePage title="Not found" message={message} signedIn={true} />, 404);
  const invoicingOf = async (): Promise<InvoicingApi | undefined> => (await deps.stripe()).invoicing;
  /** Where to look for the account's Customer: the one remembered, the card's (the balance watch's). */
  const lookup = async (accountId: string): Promise<CustomerLookup> => ({
    accountId,
    saved: (await deps.watches?.getWatch(accountId))?.autoTopUp?.customer,
    remembered: { store, now: now().toISOString() },
  });

  routes.get('/billing/profile', async (c) => {
    const invoicing = await invoicingOf();
    if (!invoicing) return notFound(c, 'Billing profiles are not available here.');
    const profile = (await readAccountProfile(invoicing, await lookup(c.var.session.accountId))) ?? EMPTY;
    return c.html(<ProfilePage profile={profile} month={month()} saved={c.req.query('saved') === '1'} />);
  });

  routes.post('/billing/profile', async (c) => {
    const invoicing = await invoicingOf();
    if (!invoicing) return notFound(c, 'Billing profiles are not available here.');
    const { accountId } = c.var.session;
    const form = await c.req.parseBody();
    /** The form as typed, shown again with what is wrong. */
    const again = (problems: string[]) => {
      const text = (name: string) =>
        typeof form[name] === 'string' ? (form[name] as string).slice(0, 300) : '';
      const typed: ProfileView = {
        legalName: text('legal_name'),
        contacts: [text('contacts')],
        address: {
          line1: text('line1'),
          line2: text('line2'),
          city: text('city'),
          state: text('state'),
          postalCode: text('postal_code'),
          country: text('country'),
        },
        taxIds: [0, 1, 2].map((i) => ({ type: text(`tax_type_${i}`), value: text(`tax_value_${i}`) })),
        poNumber: text('po_number'),
      };
      return c.html(<ProfilePage profile={typed} month={month()} problems={problems} />, 400);
    };
    let profile: BillingProfile;
    try {
      profile = profileFromForm(form);
    } catch (error) {
      if (error instanceof BillingProfileError) return again(error.problems);
      throw error;
    }
    try {
      const customer = await ensureAccountCustomer(invoicing, await lookup(accountId));
      await invoicing.saveProfile(customer, accountId, profile);
    } catch (error) {
      const refusal = stripeRefusal(error);
      if (refusal) return again([refusal]);
      throw error;
    }
    // The profile is kept by Stripe (the account's Customer), not the store: its entry is appended after.
    await deps.store.appendAudit(
      auditOf(c, 'billing_profile.changed', now().toISOString(), { target: 'billing profile' }),
    );
    return c.redirect(`${PROFILE_PATH}?saved=1`, 303);
  });

  routes.get('/billing/invoices', async (c) => {
    const invoicing = await invoicingOf();
    if (!invoicing) return notFound(c, 'Invoices are not available here.');
    const invoices = await listAccountInvoices(invoicing, await lookup(c.var.session.accountId));
    return c.html(<InvoicesPage invoices={invoices} month={month()} />);
  });

  routes.get('/billing/statement', (c) => c.redirect(`/dashboard/billing/statement/${month()}`, 302));

  routes.get('/billing/statement/:file', async (c) => {
    const file = c.req.param('file');
    const csv = file.endsWith('.csv');
    const asked = csv ? file.slice(0, -4) : file;
    try {
      monthBounds(asked);
    } catch (error) {
      if (error instanceof InvalidMonthError)
        return notFound(c, 'No such month: a statement is named YYYY-MM.');
      throw error;
    }
    if (asked > month()) return notFound(c, `No statement for ${asked} yet.`);
    const { accountId } = c.var.session;
    const [entries, keys] = await Promise.all([store.listLedger(accountId), store.listKeys(accountId)]);
    const statement = monthlyStatement(entries, asked);
    if (!csv) return c.html(<StatementPage statement={statement} keys={keys} current={month()} />);
    c.header('content-type', 'text/csv; charset=utf-8');
    c.header('content-disposition', `attachment; filename="statement-${asked}.csv"`);
    return c.body(statementCsv(statement, keys));
  });
}
