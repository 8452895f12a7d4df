/**
 * The account's billing profile: what its invoices carry (legal name, address, tax IDs, PO number)
 * and where they go (billing e-mail addresses). It is kept on the account's Stripe Customer, where
 * Stripe's invoices read it (invoicing.ts): the name, the address, the first e-mail (`email`), the tax
 * IDs, the PO number as the invoices' custom field (`invoice_settings.custom_fields`), the other
 * e-mails in the Customer's metadata (`billing_contacts`: Stripe's API has no second address).
 *
 * The form that sets it is checked with zod (functions/dashboard/profile-form.ts).
 */
import type { TaxIdType } from './tax-ids.js';

export interface BillingAddress {
  line1: string;
  line2?: string;
  city: string;
  state?: string;
  postalCode?: string;
  /** ISO 3166-1 alpha-2, upper case. */
  country: string;
}

export interface BillingProfile {
  legalName?: string;
  /** Billing e-mail addresses: the first is the Customer's `email`, where Stripe sends its invoices. */
  contacts: string[];
  address?: BillingAddress;
  taxIds: { type: TaxIdType; value: string }[];
  poNumber?: string;
}

/** The name of the invoices' custom field that holds the PO number. */
export const PO_FIELD = 'PO number';
