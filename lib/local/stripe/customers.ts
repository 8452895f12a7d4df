/**
 * The stand-in's customers as invoices need them, in Stripe's shapes and with its errors: creation,
 * retrieval (a deleted one as its stub, `{id, object: 'customer', deleted: true}`; `expand[]=tax_ids`
 * embeds its tax IDs as Stripe embeds an includable list: `{object: 'list', data, has_more, url}`, the
 * first 10, and without it the field is absent, as Stripe leaves includable fields out), the update
 * of their billing details (name, email, address, `invoice_settings[custom_fields]`,
 * metadata merged as Stripe merges it), search by one metadata field, and their tax IDs (the types of
 * functions/payments/tax-ids.ts, each value checked against its type's form: 400 `tax_id_invalid`).
 * Routed from invoices.ts.
 *
 * Search is as eventually consistent as Stripe's, never kinder: a Customer's creation or change
 * reaches it only once it is `searchLagMs` old on the stand-in's clock (state.ts: 60 000 ms by
 * default, Stripe's "searchable in less than 1 minute"; `startStripeStandIn({searchLagMs})`,
 * `setSearchLag(ms)`, and the clock moved on with `advance(ms)`). Until then a new Customer is not
 * found, and a changed one is found by what it was before the change (and returned as it is now).
 * A deleted Customer is found by no search.
 */

import {
  isTaxIdType,
  normalTaxId,
  TAX_ID_TYPES,
  taxIdCountry,
  validTaxId,
} from '../../../functions/payments/tax-ids.js';
import { type FormObject, type FormValue, formList, formMetadata, formObject, formText } from './form.js';
import { checkParams, LIST_PARAMS, page } from './params.js';
import { newId, StripeApiError, type StripeObject, type StripeObjects } from './state.js';

export const missing = (kind: string, id: string, param = 'id') =>
  new StripeApiError(404, `No such ${kind}: '${id}'`, { code: 'resource_missing', param });

export const unknownParams = (form: FormObject, known: string[]) => {
  for (const name of Object.keys(form))
    if (!known.includes(name))
      throw new StripeApiError(400, `Received unknown parameter: ${name}`, {
        code: 'parameter_unknown',
        param: name,
      });
};

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const ADDRESS_KEYS = ['line1', 'line2', 'city', 'state', 'postal_code', 'country'];

/** Metadata as Stripe merges it: a key set to '' is removed; `metadata=''` removes all. */
function mergeMetadata(current: unknown, value: FormValue | undefined): Record<string, string> {
  if (value === '') return {};
  const merged = { ...(current as Record<string, string>) };
  for (const [key, text] of Object.entries(formMetadata(value))) {
    if (text === '') delete merged[key];
    else merged[key] = text;
  }
  return merged;
}

/** `custom_fields` as Stripe takes them: up to 4, a name up to 40 characters, a value up to 140. */
export function customFields(value: FormValue | undefined, param: string): { name: string; value: string }[] {
  if (value === '' || value === undefined) return [];
  const fields = formList(value).map(formObject);
  if (fields.length > 4) throw new StripeApiError(400, 'You can have at most 4 custom fields.', { param });
  return fields.map((field, i) => {
    const name = formText(field.name) ?? '';
    const text = formText(field.value) ?? '';
    if (!name || name.length > 40)
      throw new StripeApiError(400, 'Custom field names must be 1 to 40 characters.', {
        param: `${param}[${i}][name]`,
      });
    if (!text || text.length > 140)
      throw new StripeApiError(400, 'Custom field values must be 1 to 140 characters.', {
        param: `${param}[${i}][value]`,
      });
    return { name, value: text };
  });
}

type Answer = { status: number; body: unknown };
const NO_CURSOR = { limit: 10, startingAfter: undefined, endingBefore: undefined };

export class StripeCustomers {
  readonly taxIds = new Map<string, StripeObject>();

  constructor(private readonly stripe: StripeObjects) {}

  customer(id: string, param = 'id'): StripeObject {
    const customer = this.stripe.customers.get(id);
    if (!customer || customer.deleted) throw missing('customer', id, param);
    return customer;
  }
  /** `/v1/customers/...`: `once` makes an object under the request's idempotency key. */
  route(
    method: string,
    path: string[],
    form: FormObject,
    once: (make: () => unknown) => Answer,
  ): Answer | undefined {
    const [, id, verb, sub] = path;
    const ok = (body: unknown) => ({ status: 200, body });
    if (method === 'POST' && !id) return once(() => this.createCustomer(form));
    if (method === 'GET' && id === 'search') return ok(this.search(form));
    if (method === 'GET' && id && !verb) return ok(this.retrieveCustomer(id, form));
    if (method === 'POST' && id && !verb) return ok(this.updateCustomer(id, form));
    if (verb === 'tax_ids' && id) {
      if (method === 'POST' && !sub) return once(() => this.createTaxId(id, form));
      if (method === 'GET' && !sub) return ok(this.listTaxIds(id, form));
      if (method === 'DELETE' && sub) return ok(this.deleteTaxId(id, sub));
    }
    return undefined;
  }

  // --- customers ----------------------------------------------------------------------------------

  /** `GET /v1/customers/:id`: as it is, or its stub once deleted; `expand[]=tax_ids` only. */
  private retrieveCustomer(id: string, form: FormObject): StripeObject {
    const params = checkParams(form, { expand: 'list' });
    const expand = params.list('expand') ?? [];
    for (const field of expand)
      if (field !== 'tax_ids')
        throw new StripeApiError(400, `The stand-in expands only tax_ids on a customer, not ${field}.`, {
          param: 'expand',
        });
    const customer = this.stripe.retrieve(this.stripe.customers, 'customer', id);
    if (customer.deleted || !expand.includes('tax_ids')) return structuredClone(customer);
    // Stripe embeds an includable list's first 10, newest first, as its list endpoint pages them.
    const taxIds = page(
      `/v1/customers/${id}/tax_ids`,
      this.customerTaxIds(id),
      () => true,
      NO_CURSOR,
      'tax_id',
    );
    return structuredClone({ ...customer, tax_ids: taxIds });
  }

  private createCustomer(form: FormObject): StripeObject {
    unknownParams(form, ['name', 'email', 'metadata', 'address', 'invoice_settings', 'description']);
    const customer: StripeObject = {
      id: newId('cus', 14),
      object: 'customer',
      address: null,
      created: this.stripe.nowSeconds(),
      email: null,
      invoice_prefix: newId('x', 8).slice(2, 10).toUpperCase(),
      invoice_settings: { custom_fields: null, default_payment_method: null, footer: null },
      livemode: false,
      metadata: {},
      name: null,
    };
    this.stripe.customers.set(customer.id, customer);
    return this.applyCustomer(customer, form);
  }

  private updateCustomer(id: string, form: FormObject): StripeObject {
    unknownParams(form, [
      'name',
      'email',
      'metadata',
      'address',
      'invoice_settings',
      'description',
      'expand',
    ]);
    return this.applyCustomer(this.customer(id), form);
  }

  /** Checks every parameter first, then sets them: a refused update changes nothing. */
  private applyCustomer(customer: StripeObject, form: FormObject): StripeObject {
    const changes: Record<string, unknown> = {};
    for (const name of ['name', 'email', 'description'] as const) {
      if (form[name] === undefined) continue;
      const text = formText(form[name]);
      if (text === undefined) throw new StripeApiError(400, `Invalid string: an object`, { param: name });
      if (text.length > (name === 'email' ? 512 : 256))
        throw new StripeApiError(400, `Invalid ${name}: too long`, { param: name });
      if (name === 'email' && text && !EMAIL.test(text))
        throw new StripeApiError(400, `Invalid email address: ${text}`, {
          param: 'email',
          code: 'email_invalid',
        });
      changes[name] = text === '' ? null : text;
    }
    if (form.address !== undefined) {
      const address = formObject(form.address);
      if (form.address !== '') {
        for (const key of Object.keys(address))
          if (!ADDRESS_KEYS.includes(key))
            throw new StripeApiError(400, `Received unknown parameter: address[${key}]`, {
              code: 'parameter_unknown',
              param: `address[${key}]`,
            });
        const country = formText(address.country) ?? '';
        if (country && !/^[A-Z]{2}$/.test(country))
          throw new StripeApiError(400, 'Country must be a two-letter ISO code.', {
            param: 'address[country]',
          });
      }
      changes.address =
        form.address === ''
          ? null
          : Object.fromEntries(ADDRESS_KEYS.map((key) => [key, formText(address[key]) || null]));
    }
    if (form.invoice_settings !== undefined) {
      const settings = formObject(form.invoice_settings);
      const fields = customFields(settings.custom_fields, 'invoice_settings[custom_fields]');
      changes.invoice_settings = {
        ...(customer.invoice_settings as object),
        custom_fields: fields.length > 0 ? fields : null,
      };
    }
    if (form.metadata !== undefined) changes.metadata = mergeMetadata(customer.metadata, form.metadata);
    Object.assign(customer, changes);
    customer.invoice_prefix ??= newId('x', 8).slice(2, 10).toUpperCase();
    this.stripe.indexCustomer(customer);
    return structuredClone(customer);
  }

  /**
   * Search's query, the one form the stand-in reads: `metadata['key']:'value'`, matched against each
   * Customer as search sees it (state.ts, searchableCustomers: only what is `searchLagMs` old).
   */
  private search(form: FormObject) {
    const params = checkParams(form, { query: 'text', limit: 'integer', page: 'text', expand: 'list' });
    const query = params.text('query') ?? '';
    const match = /^metadata\['([^']+)'\]:'([^']*)'$/.exec(query.trim());
    if (!match)
      throw new StripeApiError(400, `The stand-in searches customers by one metadata field only: ${query}`, {
        param: 'query',
      });
    const [, key = '', value] = match;
    const data = this.stripe
      .searchableCustomers()
      .filter(({ indexed }) => (indexed.metadata as Record<string, string>)?.[key] === value)
      .map(({ current }) => structuredClone(current))
      .reverse()
      .slice(0, params.integer('limit') ?? 10);
    return { object: 'search_result', data, has_more: false, next_page: null, url: '/v1/customers/search' };
  }

  // --- tax IDs ------------------------------------------------------------------------------------

  private createTaxId(customerId: string, form: FormObject): StripeObject {
    unknownParams(form, ['type', 'value', 'expand']);
    this.customer(customerId);
    const type = formText(form.type) ?? '';
    if (!isTaxIdType(type))
      throw new StripeApiError(400, `Invalid type: must be one of ${Object.keys(TAX_ID_TYPES).join(', ')}`, {
        param: 'type',
      });
    const raw = formText(form.value);
    if (!raw) throw new StripeApiError(400, 'Missing required param: value.', { param: 'value' });
    const value = normalTaxId(type, raw);
    if (!validTaxId(type, value))
      throw new StripeApiError(400, `Invalid value for ${type}.`, { param: 'value', code: 'tax_id_invalid' });
    const taxId: StripeObject = {
      id: newId('txi'),
      object: 'tax_id',
      country: taxIdCountry(type, value),
      created: this.stripe.nowSeconds(),
      customer: customerId,
      livemode: false,
      owner: { type: 'customer', customer: customerId },
      type,
      value,
      verification: { status: 'pending', verified_address: null, verified_name: null },
    };
    this.taxIds.set(taxId.id, taxId);
    return structuredClone(taxId);
  }

  customerTaxIds(customerId: string): StripeObject[] {
    return [...this.taxIds.values()].filter((t) => t.customer === customerId).reverse();
  }

  private listTaxIds(customerId: string, form: FormObject) {
    const params = checkParams(form, LIST_PARAMS);
    this.customer(customerId);
    const ordered = this.customerTaxIds(customerId);
    return page(
      `/v1/customers/${customerId}/tax_ids`,
      ordered,
      () => true,
      {
        limit: params.integer('limit'),
        startingAfter: params.text('starting_after'),
        endingBefore: params.text('ending_before'),
      },
      'tax_id',
    );
  }

  private deleteTaxId(customerId: string, id: string) {
    this.customer(customerId);
    const taxId = this.taxIds.get(id);
    if (!taxId || taxId.customer !== customerId) throw missing('tax_id', id);
    this.taxIds.delete(id);
    return { id, object: 'tax_id', deleted: true };
  }
}
