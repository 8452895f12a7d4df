/**
 * The Stripe stand-in: a small HTTP server on 127.0.0.1 for the few Stripe API calls the service makes
 * (functions/payments/stripe-api.ts), reached through the real `stripe` SDK's `host`/`port`/`protocol`
 * options, with Stripe's request encoding (form-encoded, bracketed keys), JSON shapes and error shape;
 * a hosted checkout page whose Pay button pays the session and sends the signed webhook; and test
 * controls (state.ts), as methods and as `POST /_stand-in/...` endpoints.
 *
 * API (each needs `Authorization: Bearer <apiKey>`, as Stripe does, or one of the restricted keys it
 * was given, within that key's permissions: keys.ts):
 *   POST /v1/checkout/sessions          GET /v1/checkout/sessions/:id
 *   GET  /v1/payment_intents/:id (expand[]=payment_method)     POST /v1/payment_intents (confirm and
 *        off_session on a saved card; an Idempotency-Key answered as Stripe does)
 *   GET  /v1/payment_methods/:id        POST /v1/payment_methods/:id/detach
 *   GET  /v1/customers/:id (invoices.ts)  DELETE /v1/customers/:id   GET /v1/charges/:id
 *   GET  /v1/refunds?charge=&payment_intent=&limit=&starting_after=     POST /v1/refunds
 *   Customers' billing details, tax IDs, invoice items and invoices: invoices.ts.
 * Pages: GET /checkout/:id (plain HTML, no script), POST /checkout/:id/pay (method=card|async);
 *   GET /invoice/:token (an invoice's hosted page) and /invoice/:token/pdf (its PDF).
 *   GET  /v1/events?type=|types[]=&created[gte]=&delivery_success=&limit=&starting_after=&ending_before=
 *   GET  /v1/events/:id   (events kept 30 days; an unknown parameter refused, 400 parameter_unknown)
 * Webhooks: each event POSTed signed; a failed attempt retried on Stripe's live-mode schedule (state.ts,
 *   RETRY_POLICY) for up to 3 days on the stand-in's clock, which a test moves with /advance.
 * Controls (JSON bodies): /_stand-in/resend {eventId}, /hold, /release {order}, /delay {ms} (webhook
 *   deliveries), /api-delay {ms} (API answers: a slow Stripe), /advance {ms}, /search-lag {ms}
 *   (customer search's lag behind the Customers: customers.ts; 60 000 by default, as Stripe's),
 *   /refund {charge, amount?}, /dispute {charge, amount?}, /settle {session, outcome},
 *   /next-off-session {outcome: card_declined | authentication_required}.
 * Every API request is counted and the latest are logged (`apiRequests()`), so a test can assert
 * how many round trips to Stripe a page costs.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type FormObject, formList, formMetadata, formObject, formText, parseForm } from './form.js';
import { invoicePage, invoicePdf } from './invoice-pdf.js';
import { StripeInvoices } from './invoices.js';
import { type KeyPermissions, missingPermission, permissionMessage } from './keys.js';
import { checkParams, inRange, LIST_PARAMS, page } from './params.js';
import { newId, type StandInState, StripeApiError, type StripeObject, StripeObjects } from './state.js';

export interface StripeStandInOptions {
  /** The secret key the SDK must send (default `sk_test_local`). */
  apiKey?: string;
  /**
   * Restricted keys it accepts beside the secret key, each with its permissions (keys.ts): a call one
   * does not allow is answered 403 `permission_error`, as Stripe answers it.
   */
  restrictedKeys?: Record<string, KeyPermissions>;
  /** The webhook endpoint's signing secret (default a fresh `whsec_...`). */
  webhookSecret?: string;
  /** Where events are POSTed; may be set later (setWebhookUrl). */
  webhookUrl?: string;
  /**
   * How long a Customer's creation or change takes to reach customer search, in ms of the stand-in's
   * clock (customers.ts); default SEARCH_LAG_MS, 60 000: Stripe's "searchable in less than 1 minute".
   */
  searchLagMs?: number;
  port?: number;
}

export interface RunningStripeStandIn {
  /** `http://127.0.0.1:<port>`: STRIPE_API_BASE for the payments code. */
  url: string;
  apiKey: string;
  webhookSecret: string;
  /** The `stripe` SDK's options that reach the stand-in. */
  sdkOptions: { host: string; port: number; protocol: 'http' };
  /** Its objects, events and test controls. */
  stripe: StripeObjects;
  /** Its customers' tax IDs, invoice items and invoices (invoices.ts). */
  invoices: StripeInvoices;
  setWebhookUrl(url: string | undefined): void;
  /**
   * A slow Stripe: each API request (`/v1/...`) waits `ms` before it is served, or is dropped
   * unserved when its client gives up first (0: at once).
   */
  setApiDelay(ms: number): void;
  /** Customer search's lag from now on (ms; 0: consistent at once, kinder than Stripe). */
  setSearchLag(ms: number): void;
  /**
   * The API requests (`/v1/...`) received so far, refused ones included: `count`, and the latest
   * (up to REQUEST_LOG_SIZE, oldest first) as `METHOD /v1/path?query`.
   */
  apiRequests(): { count: number; latest: string[] };
  close(): Promise<void>;
}

const MAX_BODY = 1024 * 1024;
/** How many of the latest API requests apiRequests() keeps. */
const REQUEST_LOG_SIZE = 200;

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new StripeApiError(413, 'Request body too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** A request's URL as logged: its query's brackets and the like decoded where they can be. */
const readable = (url: string) => {
  try {
    return decodeURIComponent(url);
  } catch {
    return url;
  }
};

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'request-id': newId('req', 14) });
  res.end(JSON.stringify(body));
}

function list(url: string, items: StripeObject[], query: FormObject): unknown {
  const limit = Math.min(Math.max(Number(formText(query.limit) ?? 10) || 10, 1), 100);
  const after = formText(query.starting_after);
  const start = after ? items.findIndex((item) => item.id === after) + 1 : 0;
  const data = items.slice(start, start + limit);
  return { object: 'list', data, has_more: start + limit < items.length, url };
}

function checkoutPage(session: StripeObject): string {
  const amount = `$${(Number(session.amount_total) / 100).toFixed(2)}`;
  const id = escapeHtml(session.id);
  const open = session.status === 'open';
  const body = open
    ? `<p>Pay <strong>${amount}</strong> (${escapeHtml(String(session.currency).toUpperCase())}) for API credits.</p>
<form method="post" action="/checkout/${id}/pay"><input type="hidden" name="method" value="card">
<button type="submit">Pay ${amount}</button></form>
<form method="post" action="/checkout/${id}/pay"><input type="hidden" name="method" value="async">
<button type="submit">Pay ${amount} by bank debit (settles later)</button></form>
${session.cancel_url ? `<p><a href="${escapeHtml(String(session.cancel_url))}">Cancel</a></p>` : ''}`
    : `<p>This checkout session is ${escapeHtml(String(session.status))}.</p>`;
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Checkout (Stripe stand-in)</title></head>
<body><h1>Stripe stand-in checkout</h1>${body}</body></html>`;
}

export async function startStripeStandIn(options: StripeStandInOptions = {}): Promise<RunningStripeStandIn> {
  const settings: StandInState = {
    apiKey: options.apiKey ?? 'sk_test_local',
    webhookSecret: options.webhookSecret ?? `whsec_${newId('local', 32).slice(6)}`,
    webhookUrl: options.webhookUrl,
  };
  const stripe = new StripeObjects(settings);
  if (options.searchLagMs !== undefined) stripe.searchLagMs = Math.max(0, options.searchLagMs);
  const invoices = new StripeInvoices(stripe);
  let baseUrl = '';
  let apiDelayMs = 0;
  let requestCount = 0;
  const requestLog: string[] = [];

  /** Resolves after `apiDelayMs`, or false at once when the client closes the connection first. */
  const slowly = (res: ServerResponse) =>
    new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        res.off('close', gone);
        resolve(true);
      }, apiDelayMs);
      const gone = () => {
        clearTimeout(timer);
        resolve(false);
      };
      res.once('close', gone);
    });

  const api = async (req: IncomingMessage, res: ServerResponse, path: string[], query: FormObject) => {
    requestCount += 1;
    requestLog.push(`${req.method} ${readable(req.url ?? '')}`);
    if (requestLog.length > REQUEST_LOG_SIZE) requestLog.shift();
    if (apiDelayMs > 0 && !(await slowly(res))) return;
    const key = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    const restricted = key === settings.apiKey ? undefined : options.restrictedKeys?.[key];
    if (key !== settings.apiKey && !restricted)
      throw new StripeApiError(401, 'Invalid API Key provided: a key the stand-in was not started with');
    const form = req.method === 'POST' ? parseForm(await readBody(req)) : query;
    const [resource = '', second, third] = path;
    const id = resource === 'checkout' ? (third ?? '') : (second ?? '');
    const nested = resource === 'checkout' ? `checkout/${second ?? ''}` : resource;
    const verb = resource === 'checkout' ? undefined : third;
    const route = `${req.method} /${nested}${id ? '/:id' : ''}${verb ? `/${verb}` : ''}`;
    const lacking = restricted && missingPermission(restricted, route, formList(form.expand).map(String));
    if (lacking) throw new StripeApiError(403, permissionMessage(key, lacking), { type: 'permission_error' });
    const once = req.headers['idempotency-key'];
    const billed = invoices.route(req.method ?? '', path, form, typeof once === 'string' ? once : undefined);
    if (billed) return sendJson(res, billed.status, billed.body);
    switch (route) {
      case 'POST /checkout/sessions':
        return sendJson(res, 200, createSession(form));
      case 'GET /checkout/sessions/:id':
        return sendJson(res, 200, stripe.session(id));
      case 'GET /payment_intents/:id':
        return sendJson(res, 200, stripe.retrieveIntent(id, formList(form.expand).map(String)));
      case 'POST /payment_intents': {
        const key = req.headers['idempotency-key'];
        const answer = stripe.idempotently(typeof key === 'string' ? key : undefined, form, () =>
          stripe.createIntent({
            amount: Number(formText(form.amount)),
            currency: formText(form.currency),
            customer: formText(form.customer),
            paymentMethod: formText(form.payment_method),
            confirm: formText(form.confirm) === 'true',
            offSession: formText(form.off_session) === 'true',
            metadata: formMetadata(form.metadata),
          }),
        );
        if (answer.replayed) res.setHeader('idempotent-replayed', 'true');
        return sendJson(res, answer.status, answer.body);
      }
      case 'GET /events':
        return sendJson(res, 200, listEvents(form));
      case 'GET /events/:id':
        checkParams(form, { expand: 'list' });
        return sendJson(res, 200, stripe.retrieveEvent(id));
      case 'GET /payment_methods/:id':
        return sendJson(res, 200, stripe.retrieve(stripe.paymentMethods, 'payment_method', id));
      case 'POST /payment_methods/:id/detach':
        return sendJson(res, 200, stripe.detachPaymentMethod(id));
      case 'DELETE /customers/:id':
        return sendJson(res, 200, stripe.deleteCustomer(id));
      case 'GET /charges/:id':
        return sendJson(res, 200, stripe.retrieve(stripe.charges, 'charge', id));
      case 'GET /refunds/:id':
        return sendJson(res, 200, stripe.retrieve(stripe.refunds, 'refund', id));
      case 'GET /refunds':
        return sendJson(
          res,
          200,
          list(
            '/v1/refunds',
            stripe.listRefunds({
              charge: formText(form.charge),
              paymentIntent: formText(form.payment_intent),
            }),
            form,
          ),
        );
      case 'POST /refunds': {
        const target = formText(form.charge) ?? formText(form.payment_intent);
        if (!target)
          throw new StripeApiError(400, 'One of charge or payment_intent is required', { param: 'charge' });
        const amount = formText(form.amount);
        return sendJson(
          res,
          200,
          await stripe.refund(target, amount === undefined ? undefined : Number(amount)),
        );
      }
      default:
        throw new StripeApiError(404, `Unrecognized request URL (${req.method}: /v1/${path.join('/')}).`);
    }
  };

  /**
   * `GET /v1/events` as Stripe answers it ("List all events"): newest first, going back 30 days;
   * `type` (one name, or a group with `*`: `charge.*`) or `types` (up to 20 names), not both;
   * `created` (an integer, or `[gt]`/`[gte]`/`[lt]`/`[lte]`); `delivery_success` (false: the events
   * still pending or whose every attempt failed); Stripe's pagination. Any other parameter is refused.
   */
  const listEvents = (form: FormObject) => {
    const params = checkParams(form, {
      ...LIST_PARAMS,
      created: 'range',
      delivery_success: 'boolean',
      type: 'text',
      types: 'list',
    });
    const type = params.text('type');
    const types = params.list('types');
    if (type !== undefined && types !== undefined)
      throw new StripeApiError(400, 'You may only specify one of these parameters: type, types.', {
        code: 'parameters_exclusive',
        param: 'type',
      });
    if (types && types.length > 20)
      throw new StripeApiError(400, 'You may pass at most 20 event types.', { param: 'types' });
    const created = params.range('created');
    const deliverySuccess = params.boolean('delivery_success');
    const typeMatches = (name: string) =>
      type === undefined
        ? types === undefined || types.includes(name)
        : type.endsWith('*')
          ? name.startsWith(type.slice(0, -1))
          : name === type;
    const retained = stripe.retainedEvents();
    const delivered = new Map(retained.map((e) => [e.event.id, e.delivered]));
    return page(
      '/v1/events',
      retained.map((e) => e.event),
      (event) =>
        typeMatches(String(event.type)) &&
        inRange(Number(event.created), created) &&
        (deliverySuccess === undefined || delivered.get(event.id) === deliverySuccess),
      {
        limit: params.integer('limit'),
        startingAfter: params.text('starting_after'),
        endingBefore: params.text('ending_before'),
      },
      'event',
    );
  };

  const createSession = (form: FormObject): StripeObject => {
    if (formText(form.mode) !== 'payment')
      throw new StripeApiError(400, 'The stand-in supports mode=payment only', { param: 'mode' });
    const items = formList(form.line_items).map(formObject);
    if (items.length === 0)
      throw new StripeApiError(400, 'Missing required param: line_items.', { param: 'line_items' });
    let amount = 0;
    let currency: string | undefined;
    for (const [i, item] of items.entries()) {
      const price = formObject(item.price_data);
      const unit = Number(formText(price.unit_amount));
      const quantity = Number(formText(item.quantity) ?? 1);
      if (!Number.isSafeInteger(unit) || unit < 0 || !Number.isSafeInteger(quantity) || quantity < 1)
        throw new StripeApiError(400, 'Invalid integer', {
          param: `line_items[${i}][price_data][unit_amount]`,
        });
      currency ??= formText(price.currency);
      amount += unit * quantity;
    }
    if (!currency)
      throw new StripeApiError(400, 'Missing required param: currency.', {
        param: 'line_items[0][price_data][currency]',
      });
    if (currency === 'usd' && amount < 50)
      throw new StripeApiError(
        400,
        "The Checkout Session's total amount due must add up to at least $0.50 usd",
        {
          param: 'line_items',
        },
      );
    const successUrl = formText(form.success_url);
    if (!successUrl)
      throw new StripeApiError(400, 'Missing required param: success_url.', { param: 'success_url' });
    const session = stripe.createSession({
      amount,
      currency,
      clientReferenceId: formText(form.client_reference_id),
      metadata: formMetadata(form.metadata),
      intentMetadata: formMetadata(formObject(form.payment_intent_data).metadata),
      successUrl,
      cancelUrl: formText(form.cancel_url),
      baseUrl,
      customerCreation: formText(form.customer_creation),
      customer: formText(form.customer),
      setupFutureUsage: formText(formObject(form.payment_intent_data).setup_future_usage),
    });
    invoices.sessionCreated(session, form.invoice_creation);
    return session;
  };

  const pages = async (req: IncomingMessage, res: ServerResponse, path: string[]) => {
    const session = stripe.session(path[1] ?? '');
    const headers = {
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
    };
    if (req.method === 'GET' && path.length === 2) {
      res.writeHead(200, headers);
      return res.end(checkoutPage(session));
    }
    if (req.method === 'POST' && path[2] === 'pay') {
      const method = formText(parseForm(await readBody(req)).method) === 'async' ? 'async' : 'card';
      // Stripe redirects at once; the webhook follows on its own schedule.
      stripe.background(stripe.pay(session.id, method));
      const target = String(session.success_url).replaceAll('{CHECKOUT_SESSION_ID}', session.id);
      res.writeHead(303, { location: target });
      return res.end();
    }
    throw new StripeApiError(404, 'Not found');
  };

  /** An invoice's hosted page (/invoice/<token>) and its PDF (/invoice/<token>/pdf), as Stripe serves them: no key. */
  const documents = async (res: ServerResponse, path: string[]) => {
    const invoice = invoices.byToken(path[1] ?? '');
    if (path[2] === 'pdf') {
      res.writeHead(200, {
        'content-type': 'application/pdf',
        'content-disposition': `inline; filename="Invoice-${String(invoice.number)}.pdf"`,
      });
      return res.end(invoicePdf(invoice));
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    return res.end(invoicePage(invoice, String(invoice.invoice_pdf)));
  };

  const controls = async (req: IncomingMessage, res: ServerResponse, action: string) => {
    const text = await readBody(req);
    const body = (text ? JSON.parse(text) : {}) as Record<string, unknown>;
    const str = (key: string) => String(body[key] ?? '');
    const amount = typeof body.amount === 'number' ? body.amount : undefined;
    switch (action) {
      case 'resend':
        return sendJson(res, 200, await stripe.resend(str('eventId')));
      case 'hold':
        stripe.hold();
        return sendJson(res, 200, { holding: true });
      case 'release': {
        const order = Array.isArray(body.order)
          ? body.order.map(String)
          : body.order === 'reverse'
            ? 'reverse'
            : 'made';
        return sendJson(res, 200, await stripe.release(order));
      }
      case 'delay':
        stripe.delayMs = Number(body.ms) || 0;
        return sendJson(res, 200, { delayMs: stripe.delayMs });
      case 'api-delay':
        apiDelayMs = Math.max(0, Number(body.ms) || 0);
        return sendJson(res, 200, { apiDelayMs });
      case 'search-lag':
        stripe.searchLagMs = Math.max(0, Number(body.ms) || 0);
        return sendJson(res, 200, { searchLagMs: stripe.searchLagMs });
      case 'refund':
        return sendJson(res, 200, await stripe.refund(str('charge'), amount));
      case 'dispute':
        return sendJson(res, 200, await stripe.dispute(str('charge'), amount));
      case 'settle':
        return sendJson(
          res,
          200,
          await stripe.settleAsync(str('session'), body.outcome === 'failed' ? 'failed' : 'succeeded'),
        );
      case 'next-off-session': {
        const outcome =
          body.outcome === 'authentication_required' ? 'authentication_required' : 'card_declined';
        stripe.failNextOffSession(outcome);
        return sendJson(res, 200, { next: outcome });
      }
      case 'events':
        return sendJson(res, 200, { events: stripe.events, deliveries: stripe.deliveries });
      case 'advance':
        return sendJson(res, 200, {
          deliveries: await stripe.advance(Number(body.ms) || 0),
          now: stripe.nowMs(),
        });
      default:
        throw new StripeApiError(404, `no control ${action}`);
    }
  };

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const path = url.pathname.split('/').filter(Boolean);
    const query = parseForm(url.search.slice(1));
    const served =
      path[0] === 'v1'
        ? api(req, res, path.slice(1), query)
        : path[0] === 'checkout'
          ? pages(req, res, path)
          : path[0] === 'invoice' && req.method === 'GET'
            ? documents(res, path)
            : path[0] === '_stand-in' && req.method === 'POST'
              ? controls(req, res, path[1] ?? '')
              : Promise.reject(new StripeApiError(404, 'Not found'));
    served.catch((error: unknown) => {
      const failure =
        error instanceof StripeApiError
          ? error
          : new StripeApiError(500, error instanceof Error ? error.message : String(error), {
              type: 'api_error',
            });
      if (!res.headersSent) sendJson(res, failure.statusCode, failure.toBody());
      else res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  baseUrl = `http://127.0.0.1:${port}`;
  invoices.baseUrl = baseUrl;
  // Stripe's retries on its own schedule, in real time (a test moves the clock with advance instead).
  const stopRetries = stripe.startRetries();
  return {
    url: baseUrl,
    apiKey: settings.apiKey,
    webhookSecret: settings.webhookSecret,
    sdkOptions: { host: '127.0.0.1', port, protocol: 'http' },
    stripe,
    invoices,
    setWebhookUrl(url) {
      settings.webhookUrl = url;
    },
    setApiDelay(ms) {
      apiDelayMs = Math.max(0, ms);
    },
    setSearchLag(ms) {
      stripe.searchLagMs = Math.max(0, ms);
    },
    apiRequests() {
      return { count: requestCount, latest: [...requestLog] };
    },
    async close() {
      stopRetries();
      await stripe.idle();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
