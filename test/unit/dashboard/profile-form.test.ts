import { describe, expect, it } from 'vitest';
import { BillingProfileError, profileFromForm } from '../../../functions/dashboard/profile-form.js';

const problems = (form: Record<string, unknown>) => {
  try {
    profileFromForm(form);
  } catch (error) {
    if (error instanceof BillingProfileError) return error.problems;
    throw error;
  }
  return [];
};

describe('the billing profile form', () => {
  it('takes a whole profile, normalising tax IDs, e-mails and the country', () => {
    expect(
      profileFromForm({
        legal_name: ' Example GmbH ',
        contacts: 'Billing@Example.com, ap@example.com;ap@example.com',
        line1: 'Hauptstr. 1',
        postal_code: '10115',
        city: 'Berlin',
        country: 'de',
        tax_type_0: 'eu_vat',
        tax_value_0: 'de 123.456.789',
        tax_type_1: 'ch_vat',
        tax_value_1: 'che-123.456.789  mwst',
        po_number: 'PO-1',
      }),
    ).toEqual({
      legalName: 'Example GmbH',
      contacts: ['billing@example.com', 'ap@example.com'],
      address: { line1: 'Hauptstr. 1', postalCode: '10115', city: 'Berlin', country: 'DE' },
      taxIds: [
        { type: 'eu_vat', value: 'DE123456789' },
        { type: 'ch_vat', value: 'CHE-123.456.789 MWST' },
      ],
      poNumber: 'PO-1',
    });
    expect(profileFromForm({})).toEqual({ contacts: [], taxIds: [] });
  });

  it('says every mistake, in words for the customer', () => {
    expect(
      problems({
        legal_name: 'x'.repeat(257),
        contacts: 'a@b.co, nope, c@d.co, e@f.co, g@h.co, i@j.co',
        city: 'Berlin',
        country: 'Germany',
        tax_type_0: 'xx_vat',
        tax_value_0: '1',
        tax_type_1: 'us_ein',
        tax_value_1: '123',
        po_number: 'p'.repeat(141),
      }),
    ).toEqual([
      'Legal name: at most 256 characters.',
      'Not an e-mail address: nope.',
      'Country: its two-letter code (ISO 3166-1), such as DE or US.',
      'PO number: at most 140 characters.',
      'At most 5 billing e-mail addresses.',
      'Address: the first line is needed.',
      'Tax ID 1: choose its type.',
      'Tax ID 2: not a valid US EIN (such as 12-3456789).',
    ]);
    expect(problems({ legal_name: 'A\nB' })).toEqual(['Legal name: one line.']);
    expect(problems({ line1: 'Street 1' })).toEqual([
      'Address: the city is needed.',
      'Address: the country is needed.',
    ]);
    expect(problems({ legal_name: ['array'] })).toEqual([]);
  });
});
