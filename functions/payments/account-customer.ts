/**
 * The account's Stripe Customer, found without relying on Stripe's customer search right after a
 * write. Search is eventually consistent: data is searchable "in less than 1 minute" and can lag "up
 * to an hour during outages", and Stripe says not to use it in read-after-write flows. A customer who
 * buys credit (Checkout is made for a Customer made just before) and opens Invoices a moment later
 * would find nothing by search. So the dashboard remembers each account's Customer in its own table
 * (Store.rememberBillingCustomer, core/store-dashboard.ts) the moment it makes or first finds one, and
 * looks in this order:
 *
 * 1. the remembered one, while Stripe still has it (customers.retrieve: there and not deleted);
 * 2. the one the account's card was saved to (the balance watch keeps it), while Stripe has it;
 * 3. search by the account's id in the Customer's metadata: only for an account from before its
 *    Customer was remembered (or whose Customers were all deleted);
 *
 * and, to buy or to save the profile, failing all three, a new one (invoicing.ts, under an idempotency
 * key). What 2, 3 or the creation gives is remembered then. The first remembered wins: a Customer
 * another request remembered meanwhile is the one used. A remembered Customer deleted in Stripe is
 * passed over (1 fails), and the one found or made instead replaces it, written only while the
 * deleted one is still the one remembered; with none found (a page that only reads), it stays
 * remembered and is passed over at each read until one is made.
 *
 * The two pages that only read ask Stripe no more than they need, each call being a round trip to
 * api.stripe.com that the page waits on:
 *
 * - Billing profile (readAccountProfile): the remembered Customer retrieved once with its tax IDs
 *   expanded, which is both its live check and the whole profile: one call. Gone (deleted, or no
 *   such Customer), the order above from 2 on, then the profile of the one found.
 * - Invoices (listAccountInvoices): the remembered Customer's invoices listed at once, with no live
 *   check first: one call. A Customer deleted in Stripe is still retrievable (its stub: Stripe keeps
 *   deleted Customers "to be able to track their history") and its invoices outlive it (an
 *   invoice's `customer` may be a deleted Customer), so listing by its id answers them: they were
 *   issued to the account, and are its invoices still, so they are shown, as on the invoices' own
 *   hosted pages. The remembered id is not replaced by this page then (the profile's page, Checkout
 *   or saving the profile do it), so until then the page shows the deleted Customer's invoices, not
 *   those of another Customer found past it. Only where Stripe answers `resource_missing` (no such
 *   Customer at all: another Stripe account or mode) is the order above followed from 2 on, and the
 *   invoices of the one found listed.
 */
import type { DashboardStore } from '../core/store-dashboard.js';
import type { BillingProfile } from './billing-profile.js';
import type { InvoiceView, InvoicingApi } from './invoicing.js';

/** Where the account's Customer is remembered (the dashboard's store), and the time to write with it. */
export interface RememberedCustomers {
  store: Pick<DashboardStore, 'billingCustomerOf' | 'rememberBillingCustomer'>;
  /** ISO time. */
  now: string;
}

export interface CustomerLookup {
  accountId: string;
  /** The Customer the account's card was saved to (the balance watch's), if any. */
  saved?: string | undefined;
  /** Where the Customer is remembered; absent: Stripe alone (the saved card's, then search). */
  remembered?: RememberedCustomers | undefined;
}

type Find = (accountId: string, known: readonly string[]) => Promise<string | undefined>;

/** What a page read before it looked further: the remembered Customer, if any, Stripe no longer has. */
interface AlreadyRead {
  remembered: string | undefined;
}

/** The order above; after `read`, from 2 on (the remembered one neither read nor asked about again). */
async function lookUp(lookup: CustomerLookup, find: Find, read?: AlreadyRead): Promise<string | undefined> {
  const { accountId, saved, remembered: memory } = lookup;
  const remembered = read ? read.remembered : await memory?.store.billingCustomerOf(accountId);
  const known = [...new Set([remembered, saved])].filter(
    (id): id is string => Boolean(id) && (!read || id !== read.remembered),
  );
  const found = await find(accountId, known);
  // The remembered one is first in `known`: anything else means Stripe no longer has it.
  if (!found || !memory || found === remembered) return found;
  return memory.store.rememberBillingCustomer(
    accountId,
    found,
    memory.now,
    remembered ? { replacing: remembered } : {},
  );
}

/** Finds the account's Customer, if it has one, by the order above (ensureAccountCustomer's makes one). */
const findIn =
  (invoicing: InvoicingApi): Find =>
  (accountId, known) =>
    invoicing.findCustomer(accountId, known);

const rememberedOf = (lookup: CustomerLookup) => lookup.remembered?.store.billingCustomerOf(lookup.accountId);

/**
 * The account's billing profile (readProfile of its Customer), or undefined without a Customer:
 * one Stripe call while the remembered one is live.
 */
export async function readAccountProfile(
  invoicing: InvoicingApi,
  lookup: CustomerLookup,
): Promise<BillingProfile | undefined> {
  const remembered = await rememberedOf(lookup);
  const profile = remembered ? await invoicing.readProfile(remembered) : undefined;
  if (profile) return profile;
  const customer = await lookUp(lookup, findIn(invoicing), { remembered });
  return customer ? invoicing.readProfile(customer) : undefined;
}

/**
 * The account's invoices, newest first (the latest 100), none without a Customer: one Stripe call
 * while a Customer is remembered and Stripe has it, deleted or not (the reasons above).
 */
export async function listAccountInvoices(
  invoicing: InvoicingApi,
  lookup: CustomerLookup,
): Promise<InvoiceView[]> {
  const remembered = await rememberedOf(lookup);
  const listed = remembered ? await invoicing.listInvoices(remembered) : undefined;
  if (listed) return listed;
  const customer = await lookUp(lookup, findIn(invoicing), { remembered });
  return (customer && (await invoicing.listInvoices(customer))) || [];
}

/** The account's Customer by the order above, or a new Customer for the account, remembered. */
export async function ensureAccountCustomer(
  invoicing: InvoicingApi,
  lookup: CustomerLookup,
): Promise<string> {
  const customer = await lookUp(lookup, (accountId, known) => invoicing.ensureCustomer(accountId, known));
  if (!customer) throw new Error(`no Stripe Customer for account ${lookup.accountId}`);
  return customer;
}
