/**
 * Invoices and the billing profile on Stripe, a port of its own beside StripeApi (which carries it as
 * `invoicing`), and its implementation on the SDK:
 *
 * - The account's Customer: one per account. The first of the ids it is known by (the one the
 *   dashboard remembered, the one its saved card was saved to: account-customer.ts) that Stripe still
 *   has, else the one whose metadata names the account (Stripe's customer search, which lags Stripe's
 *   writes by up to a minute, an hour in an outage: never the way to a Customer just made), else a
 *   new one, created with the idempotency key `customer:<accountId>` (after a deleted one,
 *   `...:after:<its id>`, a key answered with a Customer deleted since followed on the same way):
 *   two creations racing within Stripe's 24 hours of keys make one.
 * - The profile (billing-profile.ts) read from and written to that Customer, tax IDs included: read
 *   in one call, the Customer retrieved with its tax IDs expanded (`tax_ids` is an includable field:
 *   absent unless expanded; embedded, a list's first 10, the rest paged with listTaxIds), which also
 *   says whether Stripe still has it.
 * - Its invoices, newest first, with their PDF and hosted page.
 * - The invoice of a payment made without Checkout (an auto top-up's off-session PaymentIntent): a
 *   draft invoice for the Customer, the payment's amount as its one item, finalized and marked paid
 *   out of band (`paid_out_of_band`: the money came through the PaymentIntent, not the invoice). Made
 *   once per PaymentIntent: each step is taken only where the invoice is not already past it, the
 *   invoice is found again by its metadata (`payment_intent`), and each creation carries an
 *   idempotency key from the PaymentIntent.
 *
 * A Checkout purchase gets its invoice from Checkout itself (`invoice_creation`, checkout.ts), with
 * the profile's PO number as its custom field.
 */
import type Stripe from 'stripe';
import { type BillingAddress, type BillingProfile, PO_FIELD } from './billing-profile.js';
import { isTaxIdType } from './tax-ids.js';

export interface InvoiceView {
  id: string;
  number?: string;
  /** `draft`, `open`, `paid`, `uncollectible` or `void`. */
  status: string;
  /** ISO time it was made. */
  created: string;
  totalCents: number;
  currency: string;
  pdf?: string;
  hosted?: string;
  description?: string;
}

/** A payment made without Checkout, to be invoiced once it is credited. */
interface PaidPayment {
  customer: string;
  accountId: string;
  paymentIntent: string;
  amountCents: number;
  description: string;
}

export interface InvoicingApi {
  /**
   * The account's Customer as it is now, if it has one: the first of `known` (the ids it is known by,
   * in order of preference) that Stripe still has, else one search finds by the account's id.
   */
  findCustomer(accountId: string, known?: readonly string[]): Promise<string | undefined>;
  /** findCustomer, or a new Customer for the account. */
  ensureCustomer(accountId: string, known?: readonly string[]): Promise<string>;
  /**
   * The Customer's profile, in one call while it has at most 10 tax IDs; undefined when Stripe no
   * longer has it (deleted, or no such Customer): the one call is also its live check.
   */
  readProfile(customer: string): Promise<BillingProfile | undefined>;
  saveProfile(customer: string, accountId: string, profile: BillingProfile): Promise<void>;
  /**
   * The Customer's invoices, newest first (the latest 100), a deleted Customer's included (Stripe
   * lists them); undefined when Stripe has no such Customer (`resource_missing`).
   */
  listInvoices(customer: string): Promise<InvoiceView[] | undefined>;
  /** The paid invoice of `payment`, made once; its id. */
  invoicePayment(payment: PaidPayment): Promise<string>;
}

const ACCOUNT_KEY = 'accountId';
/** How many deleted Customers ensureCustomer passes over on its keys' chain before it gives up. */
const MAX_DELETED_CUSTOMERS = 10;
const CONTACTS_KEY = 'billing_contacts';
const INTENT_KEY = 'payment_intent';

const addressOf = (address: Stripe.Address | null | undefined): BillingAddress | undefined =>
  address?.line1 && address.city && address.country
    ? {
        line1: address.line1,
        ...(address.line2 ? { line2: address.line2 } : {}),
        city: address.city,
        ...(address.state ? { state: address.state } : {}),
        ...(address.postal_code ? { postalCode: address.postal_code } : {}),
        country: address.country,
      }
    : undefined;

const stripeAddress = (address: BillingAddress): Stripe.AddressParam => ({
  line1: address.line1,
  line2: address.line2 ?? '',
  city: address.city,
  state: address.state ?? '',
  postal_code: address.postalCode ?? '',
  country: address.country,
});

/** The profile's PO number as an invoice custom field (Checkout's and the invoices' own). */
export const poFields = (profile: Pick<BillingProfile, 'poNumber'>) =>
  profile.poNumber ? [{ name: PO_FIELD, value: profile.poNumber }] : [];

const viewOf = (invoice: Stripe.Invoice): InvoiceView => ({
  id: invoice.id ?? '',
  ...(invoice.number ? { number: invoice.number } : {}),
  status: invoice.status ?? 'draft',
  created: new Date(invoice.created * 1000).toISOString(),
  totalCents: invoice.total,
  currency: invoice.currency,
  ...(invoice.invoice_pdf ? { pdf: invoice.invoice_pdf } : {}),
  ...(invoice.hosted_invoice_url ? { hosted: invoice.hosted_invoice_url } : {}),
  ...(invoice.description ? { description: invoice.description } : {}),
});

/** Stripe's answer, or undefined when it answers `resource_missing` (no such object). */
async function unlessMissing<T>(call: () => Promise<T>): Promise<T | undefined> {
  try {
    return await call();
  } catch (error) {
    if ((error as { code?: unknown }).code === 'resource_missing') return undefined;
    throw error;
  }
}

const profileOf = (found: Stripe.Customer, taxIds: Stripe.TaxId[]): BillingProfile => {
  const extra = (found.metadata[CONTACTS_KEY] ?? '').split(',').filter(Boolean);
  const address = addressOf(found.address);
  const po = found.invoice_settings?.custom_fields?.find((f) => f.name === PO_FIELD)?.value;
  return {
    ...(found.name ? { legalName: found.name } : {}),
    contacts: [...(found.email ? [found.email] : []), ...extra],
    ...(address ? { address } : {}),
    taxIds: taxIds.flatMap((t) => (isTaxIdType(t.type) ? [{ type: t.type, value: t.value }] : [])),
    ...(po ? { poNumber: po } : {}),
  };
};

export function stripeInvoicing(client: Stripe): InvoicingApi {
  /** The Customer while Stripe has it (there and not deleted), with `expand`'s fields. */
  const live = async (customer: string, expand?: string[]) => {
    const found = await unlessMissing(() =>
      client.customers.retrieve(customer, expand ? { expand } : undefined),
    );
    return found?.deleted ? undefined : found;
  };
  const findCustomer = async (accountId: string, known: readonly string[] = []) => {
    for (const id of known) if (await live(id)) return id;
    // Search's query language quotes with single quotes; an account id has none (checked all the same).
    if (/['\\]/.test(accountId)) throw new Error(`account id ${accountId} cannot be searched for`);
    const found = await client.customers.search({
      query: `metadata['${ACCOUNT_KEY}']:'${accountId}'`,
      limit: 10,
    });
    return found.data.toSorted((a, b) => a.created - b.created)[0]?.id;
  };
  return {
    findCustomer,
    async ensureCustomer(accountId, known = []) {
      const found = await findCustomer(accountId, known);
      if (found) return found;
      const create = async (idempotencyKey: string) =>
        (await client.customers.create({ metadata: { [ACCOUNT_KEY]: accountId } }, { idempotencyKey })).id;
      // The same key for the same state: after a deleted Customer, a key of its own. A key Stripe
      // answers with a Customer deleted since (made under it within its 24 hours of keys) leads on to
      // the key after that one, which the creation after the deletion used: the chain ends at the
      // Customer made last, whatever search has caught up with.
      const after = (id: string | undefined) => `customer:${accountId}${id ? `:after:${id}` : ''}`;
      let made = await create(after(known[0]));
      for (let hops = 1; !(await live(made)); hops++) {
        if (hops > MAX_DELETED_CUSTOMERS) throw new Error(`account ${accountId}: too many deleted Customers`);
        made = await create(after(made));
      }
      return made;
    },
    async readProfile(customer) {
      const found = await live(customer, ['tax_ids']);
      if (!found) return undefined;
      // Embedded as a list's first page; past it (an account has few), the rest paged after its last.
      const taxIds = [...(found.tax_ids?.data ?? [])];
      const last = taxIds.at(-1);
      if (!found.tax_ids || found.tax_ids.has_more)
        for await (const taxId of client.customers.listTaxIds(customer, {
          limit: 100,
          ...(found.tax_ids && last ? { starting_after: last.id } : {}),
        }))
          taxIds.push(taxId);
      return profileOf(found, taxIds);
    },
    async saveProfile(customer, accountId, profile) {
      const [email, ...extra] = profile.contacts;
      await client.customers.update(customer, {
        name: profile.legalName ?? '',
        email: email ?? '',
        address: profile.address ? stripeAddress(profile.address) : '',
        invoice_settings: { custom_fields: profile.poNumber ? poFields(profile) : '' },
        metadata: { [ACCOUNT_KEY]: accountId, [CONTACTS_KEY]: extra.join(',') },
      });
      const wanted = new Map(profile.taxIds.map((t) => [`${t.type}:${t.value}`, t]));
      for await (const taxId of client.customers.listTaxIds(customer, { limit: 100 })) {
        const key = `${taxId.type}:${taxId.value}`;
        if (wanted.has(key)) wanted.delete(key);
        else await client.customers.deleteTaxId(customer, taxId.id);
      }
      for (const taxId of wanted.values()) await client.customers.createTaxId(customer, taxId);
    },
    async listInvoices(customer) {
      const page = await unlessMissing(() => client.invoices.list({ customer, limit: 100 }));
      return page?.data.map(viewOf);
    },
    async invoicePayment(payment) {
      const { customer, paymentIntent } = payment;
      let invoice = (await client.invoices.list({ customer, limit: 100 })).data.find(
        (found) => found.metadata?.[INTENT_KEY] === paymentIntent,
      );
      if (!invoice) {
        const owner = await client.customers.retrieve(customer);
        const fields = owner.deleted ? undefined : owner.invoice_settings?.custom_fields;
        invoice = await client.invoices.create(
          {
            customer,
            auto_advance: false,
            collection_method: 'charge_automatically',
            pending_invoice_items_behavior: 'exclude',
            currency: 'usd',
            description: payment.description,
            ...(fields?.length ? { custom_fields: fields } : {}),
            metadata: { [ACCOUNT_KEY]: payment.accountId, [INTENT_KEY]: paymentIntent },
          },
          { idempotencyKey: `invoice:${paymentIntent}` },
        );
      }
      if (invoice.status === 'draft' && invoice.total === 0) {
        await client.invoiceItems.create(
          {
            customer,
            invoice: invoice.id,
            amount: payment.amountCents,
            currency: 'usd',
            description: payment.description,
            metadata: { [INTENT_KEY]: paymentIntent },
          },
          { idempotencyKey: `invoice-item:${paymentIntent}` },
        );
      }
      const id = invoice.id ?? '';
      // A delivery of the same event at the same time may take a step first: then it is done.
      const step = async (take: () => Promise<Stripe.Invoice>, done: (status: string | null) => boolean) => {
        try {
          return await take();
        } catch (error) {
          const now = await client.invoices.retrieve(id);
          if (!done(now.status)) throw error;
          return now;
        }
      };
      if (invoice.status === 'draft')
        invoice = await step(
          () => client.invoices.finalizeInvoice(id, { auto_advance: false }),
          (status) => status !== 'draft',
        );
      if (invoice.status === 'open')
        invoice = await step(
          () => client.invoices.pay(id, { paid_out_of_band: true }),
          (status) => status === 'paid',
        );
      return id;
    },
  };
}
