/**
 * The tax ID types a billing profile may carry, as Stripe names them (`POST /v1/customers/:id/tax_ids`,
 * its `type`), each with the form Stripe expects of its value (its "Supported tax ID types" table)
 * and the country it says the ID belongs to. A value is written without spaces (a Swiss ID keeps
 * its own), upper case. The Stripe stand-in checks the same table.
 */
export const TAX_ID_TYPES = {
  eu_vat: {
    label: 'EU VAT number',
    example: 'DE123456789',
    pattern:
      /^(AT|BE|BG|CY|CZ|DE|DK|EE|EL|ES|FI|FR|HR|HU|IE|IT|LT|LU|LV|MT|NL|PL|PT|RO|SE|SI|SK|XI)[0-9A-Z]{8,12}$/,
  },
  gb_vat: { label: 'UK VAT number', example: 'GB123456789', pattern: /^GB(\d{9}|\d{12})$/ },
  ch_vat: {
    label: 'Swiss VAT number',
    example: 'CHE-123.456.789 MWST',
    pattern: /^CHE-\d{3}\.\d{3}\.\d{3} (MWST|TVA|IVA)$/,
  },
  no_vat: { label: 'Norwegian VAT number', example: '123456789MVA', pattern: /^\d{9}MVA$/ },
  us_ein: { label: 'US EIN', example: '12-3456789', pattern: /^\d{2}-\d{7}$/ },
  ca_bn: { label: 'Canadian BN', example: '123456789', pattern: /^\d{9}$/ },
  au_abn: { label: 'Australian ABN', example: '12345678912', pattern: /^\d{11}$/ },
  in_gst: {
    label: 'Indian GSTIN',
    example: '12ABCDE3456FGZH',
    pattern: /^\d{2}[A-Z]{5}\d{4}[A-Z][0-9A-Z]Z[0-9A-Z]$/,
  },
} as const satisfies Record<string, { label: string; example: string; pattern: RegExp }>;

export type TaxIdType = keyof typeof TAX_ID_TYPES;

export const isTaxIdType = (type: string): type is TaxIdType => Object.hasOwn(TAX_ID_TYPES, type);

/** The value as Stripe keeps it: trimmed, upper case, without spaces (a Swiss ID's one space kept). */
export const normalTaxId = (type: TaxIdType, value: string): string => {
  const upper = value.trim().toUpperCase();
  return type === 'ch_vat' ? upper.replace(/\s+/g, ' ') : upper.replace(/[\s.]/g, '');
};

export const validTaxId = (type: TaxIdType, value: string): boolean => TAX_ID_TYPES[type].pattern.test(value);

/** The country Stripe gives a tax ID (`EL`, Greece's VAT prefix, is GR; `XI`, Northern Ireland's, GB). */
export function taxIdCountry(type: TaxIdType, value: string): string {
  if (type === 'eu_vat') {
    const prefix = value.slice(0, 2);
    return prefix === 'EL' ? 'GR' : prefix === 'XI' ? 'GB' : prefix;
  }
  return { gb_vat: 'GB', ch_vat: 'CH', no_vat: 'NO', us_ein: 'US', ca_bn: 'CA', au_abn: 'AU', in_gst: 'IN' }[
    type
  ];
}
