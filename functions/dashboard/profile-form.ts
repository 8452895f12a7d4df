/**
 * The billing profile's form (billing-profile.tsx) checked with zod (its tree-shaken `zod/mini`: 83
 * KiB less of the dashboard's bundle than the classic API): every mistake is a message for
 * the customer (a 400 with the form again), never an error of the service. A tax ID's value is
 * checked against its type's form (payments/tax-ids.ts) before Stripe sees it.
 */
import * as z from 'zod/mini';
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

const max = (limit: number, label: string) => z.maxLength(limit, `${label}: at most ${limit} characters.`);
const optional = (limit: number, label: string) => z.string().check(max(limit, label));

const email = z
  .email({ error: (issue) => `Not an e-mail address: ${String(issue.input).slice(0, 80)}.` })
  .check(z.maxLength(254, 'An e-mail address has at most 254 characters.'));

/** Each field on its own; what concerns several (an address, a tax ID and its type) is checked after. */
const schema = z.object({
  legalName: z.string().check(
    max(256, 'Legal name'),
    z.refine((name: string) => !/[\r\n]/.test(name), 'Legal name: one line.'),
  ),
  contacts: z.array(email),
  line1: optional(200, 'Address'),
  line2: optional(200, 'Address line 2'),
  city: optional(100, 'City'),
  state: optional(100, 'State or region'),
  postalCode: optional(20, 'Postal code'),
  country: z
    .string()
    .check(z.regex(/^([A-Z]{2})?$/, 'Country: its two-letter code (ISO 3166-1), such as DE or US.')),
  poNumber: optional(140, 'PO number'),
  taxIds: z.array(z.object({ type: z.string(), value: z.string() })),
});

type Fields = z.infer<typeof schema>;

/** What the fields say together: how many e-mails, an address whole or absent, each tax ID of its type. */
function together(fields: Fields): string[] {
  const problems: string[] = [];
  if (fields.contacts.length > MAX_CONTACTS)
    problems.push(`At most ${MAX_CONTACTS} billing e-mail addresses.`);
  const address = [fields.line1, fields.line2, fields.city, fields.state, fields.postalCode];
  if (address.some(Boolean) || fields.country) {
    if (!fields.line1) problems.push('Address: the first line is needed.');
    if (!fields.city) problems.push('Address: the city is needed.');
    if (!fields.country) problems.push('Address: the country is needed.');
  }
  for (const [i, taxId] of fields.taxIds.entries()) {
    if (!isTaxIdType(taxId.type)) {
      problems.push(`Tax ID ${i + 1}: choose its type.`);
      continue;
    }
    const kind = TAX_ID_TYPES[taxId.type];
    if (!validTaxId(taxId.type, taxId.value))
      problems.push(`Tax ID ${i + 1}: not a valid ${kind.label} (such as ${kind.example}).`);
  }
  return problems;
}

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
  const typed: Fields = {
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
  };
  const parsed = schema.safeParse(typed);
  const problems = [...(parsed.success ? [] : parsed.error.issues.map((i) => i.message)), ...together(typed)];
  if (problems.length > 0 || !parsed.success) throw new BillingProfileError([...new Set(problems)]);
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
