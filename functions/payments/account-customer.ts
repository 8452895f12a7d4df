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
 */
import type { DashboardStore } from '../core/store-dashboard.js';
import type { InvoicingApi } from './invoicing.js';

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

async function lookUp(lookup: CustomerLookup, find: Find): Promise<string | undefined> {
  const { accountId, saved, remembered: memory } = lookup;
  const remembered = await memory?.store.billingCustomerOf(accountId);
  const known = [...new Set([remembered, saved])].filter((id): id is string => Boolean(id));
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

/** The account's Customer, if it has one (the order above), remembered once found. */
export function findAccountCustomer(
  invoicing: InvoicingApi,
  lookup: CustomerLookup,
): Promise<string | undefined> {
  return lookUp(lookup, (accountId, known) => invoicing.findCustomer(accountId, known));
}

/** findAccountCustomer, or a new Customer for the account, remembered. */
export async function ensureAccountCustomer(
  invoicing: InvoicingApi,
  lookup: CustomerLookup,
): Promise<string> {
  const customer = await lookUp(lookup, (accountId, known) => invoicing.ensureCustomer(accountId, known));
  if (!customer) throw new Error(`no Stripe Customer for account ${lookup.accountId}`);
  return customer;
}
