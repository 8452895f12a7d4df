/**
 * The billing profile's form (billing-profile.tsx) checked with zod: every mistake is a message for
 * the customer (a 400 with the form again), never an error of the service. A tax ID's value is
 * checked against its type's form (payments/tax-ids.ts) before Stripe sees it.
 */
import { z } from 'zod';
import type { BillingProfile } from '../payments/billing-profile.js';
import { isTaxIdType, normalTaxId, TAX_ID_TYPES, type TaxIdType, validTaxId } from '../payments/tax-ids.js';

/** How many tax IDs the form has room for, and how many billing e-mails it takes. */
export const TAX_ID_SLOTS = 3;
const MAX_CONTACTS = 5;

export class BillingProfileError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join(' '));
    this.name = 'BillingProfileError';
  }
}

const field = (form: Record<string, unknown>, name: string): string =>
  typeof form[name] === 'string' ? (form[name] as string).trim() : '';

const optional = (max: number, label: string) => z.string().max(max, `${label}: at most ${max} characters.`);

const email = z.email({ error: (issue) => `Not an e-mail address: ${String(issue.input).slice(0, 80)}.` });

const schema = z
  .object({
    legalName: z
      .string()
      .max(256, 'Legal name: at most 256 characters.')
      .refine((name) => !/[\r\n]/.test(name), 'Legal name: one line.'),
    contacts: z
      .array(email.max(254, 'An e-mail address has at most 254 characters.'))
      .max(MAX_CONTACTS, `At most ${MAX_CONTACTS} billing e-mail addresses.`),
    line1: optional(200, 'Address'),
    line2: optional(200, 'Address line 2'),
    city: optional(100, 'City'),
    state: optional(100, 'State or region'),
    postalCode: optional(20, 'Postal code'),
    country: z
      .string()
      .regex(/^([A-Z]{2})?$/, 'Country: its two-letter code (ISO 3166-1), such as DE or US.'),
    poNumber: optional(140, 'PO number'),
    taxIds: z.array(z.object({ type: z.string(), value: z.string() })),
  })
  .superRefine((profile, context) => {
    const address = [profile.line1, profile.line2, profile.city, profile.state, profile.postalCode];
    if (address.some(Boolean) || profile.country) {
      if (!profile.line1) context.addIssue({ code: 'custom', message: 'Address: the first line is needed.' });
      if (!profile.city) context.addIssue({ code: 'custom', message: 'Address: the city is needed.' });
      if (!profile.country) context.addIssue({ code: 'custom', message: 'Address: the country is needed.' });
    }
    for (const [i, taxId] of profile.taxIds.entries()) {
      if (!isTaxIdType(taxId.type)) {
        context.addIssue({ code: 'custom', message: `Tax ID ${i + 1}: choose its type.` });
        continue;
      }
      const kind = TAX_ID_TYPES[taxId.type];
      if (!validTaxId(taxId.type, taxId.value))
        context.addIssue({
          code: 'custom',
          message: `Tax ID ${i + 1}: not a valid ${kind.label} (such as ${kind.example}).`,
        });
    }
  });

/** The contacts a text field lists: separated by commas, semicolons, spaces or line breaks. */
const contactsOf = (text: string) => text.split(/[\s,;]+/).filter(Boolean);

/** The profile the form posted, checked; throws BillingProfileError with every problem found. */
export function profileFromForm(form: Record<string, unknown>): BillingProfile {
  const taxIds = [];
  for (let i = 0; i < TAX_ID_SLOTS; i += 1) {
    const type = field(form, `tax_type_${i}`);
    const value = field(form, `tax_value_${i}`);
    if (!value) continue;
    taxIds.push({ type, value: isTaxIdType(type) ? normalTaxId(type, value) : value });
  }
  const parsed = schema.safeParse({
    legalName: field(form, 'legal_name'),
    contacts: contactsOf(field(form, 'contacts')),
    line1: field(form, 'line1'),
    line2: field(form, 'line2'),
    city: field(form, 'city'),
    state: field(form, 'state'),
    postalCode: field(form, 'postal_code'),
    country: field(form, 'country').toUpperCase(),
    poNumber: field(form, 'po_number'),
    taxIds,
  });
  if (!parsed.success) throw new BillingProfileError([...new Set(parsed.error.issues.map((i) => i.message))]);
  const p = parsed.data;
  return {
    ...(p.legalName ? { legalName: p.legalName } : {}),
    contacts: [...new Set(p.contacts.map((c) => c.toLowerCase()))],
    ...(p.line1
      ? {
          address: {
            line1: p.line1,
            ...(p.line2 ? { line2: p.line2 } : {}),
            city: p.city,
            ...(p.state ? { state: p.state } : {}),
            ...(p.postalCode ? { postalCode: p.postalCode } : {}),
            country: p.country,
          },
        }
      : {}),
    taxIds: p.taxIds.map((t) => ({ type: t.type as TaxIdType, value: t.value })),
    ...(p.poNumber ? { poNumber: p.poNumber } : {}),
  };
}
