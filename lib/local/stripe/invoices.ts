/**
 * The stand-in's invoices (and, through customers.ts, its customers' billing details and tax IDs), in Stripe's JSON shapes and with its
 * errors (400 `invalid_request_error` naming the `param`; `parameter_unknown`, `resource_missing`,
 * `tax_id_invalid`, `email_invalid`, `invoice_not_editable`):
 *
 *   POST /v1/customers            POST /v1/customers/:id (name, email, address, invoice_settings
 *   GET  /v1/customers/search?query=metadata['key']:'value'     [custom_fields], metadata)
 *   POST|GET /v1/customers/:id/tax_ids      DELETE /v1/customers/:id/tax_ids/:id
 *   GET  /v1/customers/:id (expand[]=tax_ids)
 *   POST /v1/invoiceitems          POST|GET /v1/invoices       GET /v1/invoices/:id
 *   POST /v1/invoices/:id/finalize            POST /v1/invoices/:id/pay (paid_out_of_band only)
 *
 * Listing a customer's invoices (`GET /v1/invoices?customer=`) lists a deleted customer's too, and
 * refuses one Stripe never had (400 `resource_missing`, param `customer`).
 *
 * Every POST that creates honours an Idempotency-Key as Stripe does. Search lags as Stripe's does
 * (customers.ts: a minute by default). A finalized invoice copies the customer's name, e-mail, address and
 * tax IDs, as Stripe's does, and gets its number (the customer's prefix and a sequence), its hosted
 * page and its PDF (invoice-pdf.ts), served without the API key as Stripe serves them, at an
 * unguessable URL. Checkout's `invoice_creation`: the session's paid invoice, made as it is paid
 * (`session.invoice`). No invoice event is sent (the service subscribes to none).
 */
import { customFields, missing, StripeCustomers, unknownParams } from './customers.js';
import { type FormObject, type FormValue, formMetadata, formObject, formText } from './form.js';
import { checkParams, LIST_PARAMS, page } from './params.js';
import { newId, StripeApiError, type StripeObject, type StripeObjects } from './state.js';

export class StripeInvoices {
  readonly customers: StripeCustomers;
  readonly invoices = new Map<string, StripeObject>();
  readonly invoiceItems = new Map<string, StripeObject>();
  /** Each invoice's document token: its hosted page and PDF are at /invoice/<token>(/pdf). */
  private readonly tokens = new Map<string, string>();
  private readonly sessionInvoices = new Map<string, Record<string, unknown>>();
  baseUrl = '';

  constructor(private readonly stripe: StripeObjects) {
    this.customers = new StripeCustomers(stripe);
    stripe.onSessionPaid = (session) => this.checkoutInvoice(session);
  }

  /** A route of this file's or customers.ts's, or undefined: the caller's own routes then. */
  route(
    method: string,
    path: string[],
    form: FormObject,
    key: string | undefined,
  ): { status: number; body: unknown } | undefined {
    const [resource, id, verb] = path;
    const once = (make: () => unknown) =>
      this.stripe.idempotently(key, { path, form }, () => ({ status: 200, body: make() }));
    const ok = (body: unknown) => ({ status: 200, body });
    if (resource === 'customers') return this.customers.route(method, path, form, once);
    if (resource === 'invoiceitems' && method === 'POST' && !id) return once(() => this.createItem(form));
    if (resource !== 'invoices') return undefined;
    if (method === 'POST' && !id) return once(() => this.createInvoice(form));
    if (method === 'GET' && !id) return ok(this.listInvoices(form));
    if (method === 'GET' && id && !verb) return ok(this.invoice(id));
    if (method === 'POST' && id && verb === 'finalize') return ok(this.finalize(id));
    if (method === 'POST' && id && verb === 'pay') return ok(this.pay(id, form));
    return undefined;
  }

  // --- invoices -----------------------------------------------------------------------------------

  invoice(id: string): StripeObject {
    const invoice = this.invoices.get(id);
    if (!invoice) throw missing('invoice', id);
    return invoice;
  }

  private newInvoice(customer: StripeObject | null, fields: Record<string, unknown>): StripeObject {
    const invoice: StripeObject = {
      id: newId('in'),
      object: 'invoice',
      account_country: 'US',
      account_name: 'Stripe stand-in',
      amount_due: 0,
      amount_paid: 0,
      amount_paid_off_stripe: 0,
      amount_remaining: 0,
      attempted: false,
      auto_advance: false,
      collection_method: 'charge_automatically',
      created: this.stripe.nowSeconds(),
      currency: 'usd',
      custom_fields: null,
      customer: customer?.id ?? null,
      customer_address: null,
      customer_email: null,
      customer_name: null,
      customer_tax_ids: [],
      description: null,
      hosted_invoice_url: null,
      invoice_pdf: null,
      lines: { object: 'list', data: [], has_more: false, total_count: 0, url: '' },
      livemode: false,
      metadata: {},
      number: null,
      status: 'draft',
      status_transitions: {
        finalized_at: null,
        marked_uncollectible_at: null,
        paid_at: null,
        voided_at: null,
      },
      subtotal: 0,
      total: 0,
      ...fields,
    };
    (invoice.lines as { url: string }).url = `/v1/invoices/${invoice.id}/lines`;
    this.invoices.set(invoice.id, invoice);
    return invoice;
  }

  private createInvoice(form: FormObject): StripeObject {
    unknownParams(form, [
      'customer',
      'auto_advance',
      'collection_method',
      'currency',
      'custom_fields',
      'description',
      'metadata',
      'pending_invoice_items_behavior',
      'days_until_due',
      'footer',
      'expand',
    ]);
    const customerId = formText(form.customer);
    if (!customerId)
      throw new StripeApiError(400, 'Missing required param: customer.', { param: 'customer' });
    const customer = this.customers.customer(customerId, 'customer');
    const method = formText(form.collection_method) ?? 'charge_automatically';
    if (!['charge_automatically', 'send_invoice'].includes(method))
      throw new StripeApiError(400, `Invalid collection_method: ${method}`, { param: 'collection_method' });
    if (method === 'send_invoice' && form.days_until_due === undefined)
      throw new StripeApiError(400, 'Missing required param: days_until_due.', { param: 'days_until_due' });
    const pending = formText(form.pending_invoice_items_behavior) ?? 'exclude';
    if (!['include', 'exclude'].includes(pending))
      throw new StripeApiError(400, `Invalid pending_invoice_items_behavior: ${pending}`, {
        param: 'pending_invoice_items_behavior',
      });
    const fields = customFields(form.custom_fields, 'custom_fields');
    const invoice = this.newInvoice(customer, {
      auto_advance: formText(form.auto_advance) === 'true',
      collection_method: method,
      currency: formText(form.currency) ?? 'usd',
      custom_fields:
        fields.length > 0
          ? fields
          : ((customer.invoice_settings as { custom_fields: unknown })?.custom_fields ?? null),
      description: formText(form.description) ?? null,
      metadata: formMetadata(form.metadata),
    });
    if (pending === 'include')
      for (const item of this.invoiceItems.values())
        if (item.customer === customerId && item.invoice === null) this.addLine(invoice, item);
    return structuredClone(invoice);
  }

  private addLine(invoice: StripeObject, item: StripeObject): void {
    item.invoice = invoice.id;
    const lines = invoice.lines as { data: StripeObject[]; total_count: number };
    lines.data.push({
      id: newId('il'),
      object: 'line_item',
      amount: item.amount,
      currency: item.currency,
      description: item.description,
      invoice: invoice.id,
      metadata: item.metadata,
      quantity: 1,
    });
    lines.total_count = lines.data.length;
    const total = lines.data.reduce((sum, line) => sum + Number(line.amount), 0);
    Object.assign(invoice, { subtotal: total, total, amount_due: total, amount_remaining: total });
  }

  private createItem(form: FormObject): StripeObject {
    unknownParams(form, ['customer', 'amount', 'currency', 'description', 'invoice', 'metadata', 'expand']);
    const customerId = formText(form.customer);
    if (!customerId)
      throw new StripeApiError(400, 'Missing required param: customer.', { param: 'customer' });
    this.customers.customer(customerId, 'customer');
    const amount = formText(form.amount);
    if (amount === undefined || !/^-?\d+$/.test(amount))
      throw new StripeApiError(400, `Invalid integer: ${amount ?? ''}`, { param: 'amount' });
    const currency = formText(form.currency);
    if (!currency) throw new StripeApiError(400, 'Missing required param: currency.', { param: 'currency' });
    const invoiceId = formText(form.invoice);
    const invoice = invoiceId ? this.invoices.get(invoiceId) : undefined;
    if (invoiceId && !invoice) throw missing('invoice', invoiceId, 'invoice');
    if (invoice && (invoice.status !== 'draft' || invoice.customer !== customerId))
      throw new StripeApiError(
        400,
        `Invoice ${invoiceId} is not a draft of customer ${customerId}: it cannot take items.`,
        {
          param: 'invoice',
          code: 'invoice_not_editable',
        },
      );
    const item: StripeObject = {
      id: newId('ii'),
      object: 'invoiceitem',
      amount: Number(amount),
      currency,
      customer: customerId,
      date: this.stripe.nowSeconds(),
      description: formText(form.description) ?? null,
      invoice: null,
      livemode: false,
      metadata: formMetadata(form.metadata),
    };
    this.invoiceItems.set(item.id, item);
    if (invoice) this.addLine(invoice, item);
    return structuredClone(item);
  }

  private listInvoices(form: FormObject) {
    const params = checkParams(form, { ...LIST_PARAMS, customer: 'text', status: 'text' });
    const customer = params.text('customer');
    const status = params.text('status');
    // A customer Stripe never had is refused; a deleted one is still retrievable (its stub), so its
    // invoices, which outlive it (an invoice's `customer` may be a deleted Customer), are listed.
    if (customer !== undefined && !this.stripe.customers.has(customer))
      throw new StripeApiError(400, `No such customer: '${customer}'`, {
        code: 'resource_missing',
        param: 'customer',
      });
    return page(
      '/v1/invoices',
      [...this.invoices.values()].reverse(),
      (invoice) =>
        (customer === undefined || invoice.customer === customer) &&
        (status === undefined || invoice.status === status),
      {
        limit: params.integer('limit'),
        startingAfter: params.text('starting_after'),
        endingBefore: params.text('ending_before'),
      },
      'invoice',
    );
  }

  /** Draft to open (or paid, when nothing is due): the customer's details copied, numbered, documents made. */
  private finalize(id: string): StripeObject {
    const invoice = this.invoice(id);
    if (invoice.status !== 'draft')
      throw new StripeApiError(
        400,
        "This invoice is already finalized, you can't re-finalize a non-draft invoice.",
        {
          code: 'invoice_not_editable',
        },
      );
    const customer = this.stripe.customers.get(String(invoice.customer));
    const prefix = String(customer?.invoice_prefix ?? 'STANDIN');
    const sequence =
      [...this.invoices.values()].filter((i) => i.customer === invoice.customer && i.number).length + 1;
    const token = newId('live', 32);
    this.tokens.set(token, id);
    const now = this.stripe.nowSeconds();
    const paid = invoice.total === 0;
    Object.assign(invoice, {
      number: `${prefix}-${String(sequence).padStart(4, '0')}`,
      status: paid ? 'paid' : 'open',
      customer_name: customer?.name ?? null,
      customer_email: customer?.email ?? null,
      customer_address: customer?.address ?? null,
      customer_tax_ids: this.customers
        .customerTaxIds(String(invoice.customer))
        .reverse()
        .map((t) => ({ type: t.type, value: t.value })),
      hosted_invoice_url: `${this.baseUrl}/invoice/${token}`,
      invoice_pdf: `${this.baseUrl}/invoice/${token}/pdf`,
    });
    Object.assign(invoice.status_transitions as object, {
      finalized_at: now,
      ...(paid ? { paid_at: now } : {}),
    });
    return structuredClone(invoice);
  }

  /** Only `paid_out_of_band=true`: the stand-in charges no invoice. */
  private pay(id: string, form: FormObject): StripeObject {
    unknownParams(form, ['paid_out_of_band', 'expand']);
    const invoice = this.invoice(id);
    if (invoice.status !== 'open')
      throw new StripeApiError(
        400,
        `Invoice is ${String(invoice.status)}: only an open invoice can be paid.`,
        {
          code: 'invoice_not_editable',
        },
      );
    if (formText(form.paid_out_of_band) !== 'true')
      throw new StripeApiError(400, 'The stand-in pays invoices out of band only (paid_out_of_band=true).', {
        param: 'paid_out_of_band',
      });
    Object.assign(invoice, {
      status: 'paid',
      amount_paid: invoice.amount_due,
      amount_paid_off_stripe: invoice.amount_due,
      amount_remaining: 0,
    });
    (invoice.status_transitions as { paid_at: number }).paid_at = this.stripe.nowSeconds();
    return structuredClone(invoice);
  }

  // --- Checkout -----------------------------------------------------------------------------------

  /** A session's `invoice_creation` (checked as Stripe checks it), kept until it is paid. */
  sessionCreated(session: StripeObject, value: FormValue | undefined): void {
    const creation = formObject(value);
    session.invoice = null;
    session.invoice_creation = null;
    if (value === undefined) return;
    const enabled = formText(creation.enabled);
    if (enabled !== 'true' && enabled !== 'false')
      throw new StripeApiError(400, 'Missing required param: invoice_creation[enabled].', {
        param: 'invoice_creation[enabled]',
      });
    const data = formObject(creation.invoice_data);
    const fields = customFields(data.custom_fields, 'invoice_creation[invoice_data][custom_fields]');
    const invoiceData = {
      account_tax_ids: null,
      custom_fields: fields.length > 0 ? fields : null,
      description: formText(data.description) ?? null,
      footer: formText(data.footer) ?? null,
      issuer: null,
      metadata: formMetadata(data.metadata),
      rendering_options: null,
    };
    session.invoice_creation = { enabled: enabled === 'true', invoice_data: invoiceData };
    if (enabled === 'true') this.sessionInvoices.set(session.id, invoiceData);
  }

  /** The paid invoice of a session paid with `invoice_creation` enabled: `session.invoice`. */
  private checkoutInvoice(session: StripeObject): void {
    const data = this.sessionInvoices.get(session.id);
    if (!data) return;
    this.sessionInvoices.delete(session.id);
    const customer =
      typeof session.customer === 'string' ? this.stripe.customers.get(session.customer) : undefined;
    const invoice = this.newInvoice(customer ?? null, {
      custom_fields: data.custom_fields,
      description: data.description,
      metadata: data.metadata,
      currency: session.currency,
    });
    this.addLine(invoice, {
      id: newId('ii'),
      object: 'invoiceitem',
      amount: session.amount_total,
      currency: session.currency,
      description: String(data.description ?? 'Checkout payment'),
      metadata: {},
    });
    this.finalize(invoice.id);
    this.pay(invoice.id, { paid_out_of_band: 'true' });
    // Paid by the session's own PaymentIntent, not outside Stripe.
    invoice.amount_paid_off_stripe = 0;
    session.invoice = invoice.id;
  }

  /** The invoice a document token names. */
  byToken(token: string): StripeObject {
    const id = this.tokens.get(token);
    if (!id) throw new StripeApiError(404, 'Not found');
    return this.invoice(id);
  }
}
