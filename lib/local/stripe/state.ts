/**
 * The Stripe stand-in's objects and what happens to them: Checkout Sessions, PaymentIntents, Charges,
 * Refunds and Disputes in Stripe's JSON shapes (the fields the service reads, and the ones that
 * identify an object), and the events they produce, each signed with the SDK's own
 * `webhooks.generateTestHeaderString` and POSTed to the webhook URL as Stripe does. Each event carries
 * a snapshot of its object as of that moment, so that an event delivered late says what it said
 * when it was made (a first refund's `amount_refunded`, say), as Stripe's do.
 *
 * Test controls: send an event again, hold events and release them in another order, delay each
 * delivery, refund (partly or wholly), dispute, and settle an asynchronous payment later.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import Stripe from 'stripe';

export type StripeObject = Record<string, unknown> & { id: string; object: string };

/** An error as Stripe answers it: `{error: {type, message, param?, code?}}` with its HTTP status. */
export class StripeApiError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    readonly details: { type?: string; param?: string; code?: string; [field: string]: unknown } = {},
  ) {
    super(message);
    this.name = 'StripeApiError';
  }

  toBody() {
    return {
      error: { type: this.details.type ?? 'invalid_request_error', message: this.message, ...this.details },
    };
  }
}

export const newId = (prefix: string, length = 24) =>
  `${prefix}_${randomBytes(length)
    .toString('base64')
    .replace(/[^A-Za-z0-9]/g, '')
    .slice(0, length)}`;

const snapshot = <T>(object: T): T => structuredClone(object);

export interface SentEvent {
  id: string;
  type: string;
  /** The event as sent (its object's snapshot). */
  event: StripeObject;
}

export interface Delivery {
  eventId: string;
  type: string;
  /** The webhook's HTTP status; 0 when it could not be reached or no URL is set. */
  status: number;
  body: string;
  /** What sent it: Stripe's own attempts (the first and its retries), or a resend asked for. */
  by: 'stripe' | 'resend';
  /** When, on the stand-in's clock (ms since the epoch). */
  at: number;
}

/**
 * Stripe's automatic delivery in live mode: "for up to 3 days with an exponential back off" (its
 * webhooks guide; sandboxes retry three times over a few hours). Stripe does not state the intervals:
 * here the first retry is a minute after the first attempt, each wait doubles up to 12 hours, and no
 * attempt is made later than 3 days after the event was created. An event never delivered then is
 * never sent again unless resent; it keeps `pending_webhooks: 1` and is listed with
 * `delivery_success=false` for as long as Stripe keeps events (30 days).
 */
export const RETRY_POLICY = {
  firstRetryMs: 60_000,
  maxWaitMs: 12 * 3600_000,
  giveUpAfterMs: 3 * 24 * 3600_000,
} as const;
/** How long Stripe keeps an event: listing and retrieving reach back this far ("List all events"). */
const EVENT_RETENTION_MS = 30 * 24 * 3600_000;

/**
 * How far customer search lags behind the Customers, by default (ms on the stand-in's clock): Stripe's
 * search is eventually consistent, "data is searchable in less than 1 minute" under normal operating
 * conditions and "propagation of new or updated data can lag up to an hour during outages"; it is not
 * for read-after-write flows (its Search API guide). The stand-in takes the minute as its bound.
 */
export const SEARCH_LAG_MS = 60_000;

/** Where an event's automatic delivery stands. */
interface DeliveryState {
  /** Stripe's attempts so far (resends not counted). */
  attempts: number;
  /** When the next automatic attempt is due (stand-in clock, ms); none once delivered or given up. */
  nextAt: number | undefined;
  delivered: boolean;
}

/** The wait before automatic retry number `retry` (1 for the first retry). */
export function retryWaitMs(retry: number): number {
  return Math.min(RETRY_POLICY.firstRetryMs * 2 ** (retry - 1), RETRY_POLICY.maxWaitMs);
}

/** A confirmed off-session payment: succeeds, or is declined as Stripe declines one (402 card_error). */
export type OffSessionOutcome = 'succeed' | 'card_declined' | 'authentication_required';

/** The error Stripe answers for each decline (docs.stripe.com/declines/codes, /error-codes). */
const DECLINES: Record<Exclude<OffSessionOutcome, 'succeed'>, { decline_code: string; message: string }> = {
  card_declined: { decline_code: 'generic_decline', message: 'Your card was declined.' },
  authentication_required: {
    decline_code: 'authentication_required',
    message: 'Your card was declined. This transaction requires authentication.',
  },
};

export interface StandInState {
  apiKey: string;
  webhookSecret: string;
  webhookUrl: string | undefined;
}

export class StripeObjects {
  readonly sessions = new Map<string, StripeObject>();
  readonly paymentIntents = new Map<string, StripeObject>();
  readonly charges = new Map<string, StripeObject>();
  readonly refunds = new Map<string, StripeObject>();
  readonly disputes = new Map<string, StripeObject>();
  readonly customers = new Map<string, StripeObject>();
  readonly paymentMethods = new Map<string, StripeObject>();
  /** Told of each session paid, before its event is made (its invoice, invoices.ts). */
  onSessionPaid: ((session: StripeObject) => void) | undefined;
  /** What the next confirmed off-session payment does (a test control), then back to succeeding. */
  private nextOffSession: OffSessionOutcome = 'succeed';
  /** Answers by idempotency key: the first request's parameters and answer, replayed to a repeat. */
  private readonly idempotent = new Map<string, { params: string; status: number; body: unknown }>();
  /** Every event made, in order. */
  readonly events: SentEvent[] = [];
  /** Every delivery attempt, in order. */
  readonly deliveries: Delivery[] = [];
  /** Each delivery waits this long first (ms). */
  delayMs = 0;
  private held: SentEvent[] | undefined;
  /** Each session's `payment_intent_data.metadata`, which its PaymentIntent gets when it is created. */
  private readonly intentMetadata = new Map<string, Record<string, string>>();
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Each session's `payment_intent_data.setup_future_usage`: its card is saved to its customer. */
  private readonly setupFutureUsage = new Map<string, string>();

  /** Each event's automatic delivery: attempts, the next one due, delivered or not. */
  private readonly delivery = new Map<string, DeliveryState>();
  /** How far the stand-in's clock is ahead of the wall clock (advance). */
  private offsetMs = 0;
  /** How far customer search lags behind the Customers' changes (ms, the stand-in's clock). */
  searchLagMs = SEARCH_LAG_MS;
  /** Each Customer as search indexes it: every version made, oldest first, with when it was made. */
  private readonly searchIndex = new Map<string, { at: number; customer: StripeObject }[]>();
  /** The automatic retries under way (one pass at a time). */
  private retrying: Promise<void> = Promise.resolve();

  constructor(private readonly settings: StandInState) {}

  // --- the clock ----------------------------------------------------------------------------------

  /**
   * The stand-in's clock (ms since the epoch): the wall clock plus what advance added. Objects'
   * `created`, events' retention and the retry schedule run on it; a webhook's signature carries the
   * wall clock's time, as the receiver checks it against its own.
   */
  nowMs(): number {
    return Date.now() + this.offsetMs;
  }

  nowSeconds(): number {
    return Math.floor(this.nowMs() / 1000);
  }

  /**
   * Moves the clock `ms` forward, making each automatic retry that falls due on the way at its time,
   * in order, each awaited: four simulated days of Stripe's retries without waiting for them.
   */
  async advance(ms: number): Promise<Delivery[]> {
    const until = this.nowMs() + ms;
    const made = await this.retryDue(until);
    this.offsetMs += Math.max(0, until - this.nowMs());
    return made;
  }

  /** Makes the automatic retries due by `until` (default now), moving the clock to each one's time. */
  retryDue(until = this.nowMs()): Promise<Delivery[]> {
    const run = this.retrying.then(async () => {
      const made: Delivery[] = [];
      for (;;) {
        let next: { sent: SentEvent; at: number } | undefined;
        for (const sent of this.events) {
          const at = this.delivery.get(sent.id)?.nextAt;
          if (at !== undefined && at <= until && (!next || at < next.at)) next = { sent, at };
        }
        if (!next) return made;
        if (next.at > this.nowMs()) this.offsetMs += next.at - this.nowMs();
        (this.delivery.get(next.sent.id) as DeliveryState).nextAt = undefined;
        made.push(await this.deliver(next.sent, 'stripe'));
      }
    });
    this.retrying = run.then(
      () => {},
      () => {},
    );
    return run;
  }

  /** Runs due retries every `intervalMs` of wall time (npm start: Stripe's schedule in real time). */
  startRetries(intervalMs = 1000): () => void {
    const timer = setInterval(() => {
      this.background(this.retryDue());
    }, intervalMs);
    timer.unref();
    return () => clearInterval(timer);
  }

  // --- customer search ----------------------------------------------------------------------------

  /** A Customer made or changed (its new version): search sees it once it is searchLagMs old. */
  indexCustomer(customer: StripeObject): void {
    const versions = this.searchIndex.get(customer.id) ?? [];
    versions.push({ at: this.nowMs(), customer: snapshot(customer) });
    this.searchIndex.set(customer.id, versions);
  }

  /**
   * The Customers search sees now, oldest first, each as `indexed` (its newest version at least
   * searchLagMs old, which a query is matched against: a change not yet propagated leaves the
   * version before it searchable, as Stripe's index does) and as it is (`current`, what search
   * returns). A Customer none of whose versions is that old is not there; a deleted one neither.
   */
  searchableCustomers(): { indexed: StripeObject; current: StripeObject }[] {
    const until = this.nowMs() - this.searchLagMs;
    const seen: { indexed: StripeObject; current: StripeObject }[] = [];
    for (const current of this.customers.values()) {
      const indexed = this.searchIndex.get(current.id)?.findLast((version) => version.at <= until);
      if (indexed && !current.deleted) seen.push({ indexed: indexed.customer, current });
    }
    return seen;
  }

  // --- objects ------------------------------------------------------------------------------------

  session(id: string): StripeObject {
    const session = this.sessions.get(id);
    if (!session)
      throw new StripeApiError(404, `No such checkout.session: '${id}'`, {
        code: 'resource_missing',
        param: 'session',
      });
    return session;
  }

  retrieve(map: Map<string, StripeObject>, kind: string, id: string): StripeObject {
    const object = map.get(id);
    if (!object)
      throw new StripeApiError(404, `No such ${kind}: '${id}'`, { code: 'resource_missing', param: 'id' });
    return object;
  }

  /** A charge by its id or its PaymentIntent's. */
  chargeOf(id: string): StripeObject {
    const viaIntent = this.paymentIntents.get(id)?.latest_charge;
    const charge = this.charges.get(typeof viaIntent === 'string' ? viaIntent : id);
    if (!charge)
      throw new StripeApiError(404, `No such charge: '${id}'`, { code: 'resource_missing', param: 'charge' });
    return charge;
  }

  createSession(fields: {
    amount: number;
    currency: string;
    clientReferenceId: string | undefined;
    metadata: Record<string, string>;
    intentMetadata: Record<string, string>;
    successUrl: string;
    cancelUrl: string | undefined;
    baseUrl: string;
    customerCreation?: string | undefined;
    /** An existing Customer the session pays as (and saves the card to), as Stripe's `customer`. */
    customer?: string | undefined;
    setupFutureUsage?: string | undefined;
  }): StripeObject {
    // As Stripe: `customer` and `customer_creation` exclude each other, and the customer must exist.
    if (fields.customer && fields.customerCreation)
      throw new StripeApiError(
        400,
        'You may only specify one of these parameters: customer, customer_creation.',
        {
          param: 'customer_creation',
        },
      );
    if (fields.customer) {
      const customer = this.customers.get(fields.customer);
      if (!customer || customer.deleted)
        throw new StripeApiError(400, `No such customer: '${fields.customer}'`, {
          code: 'resource_missing',
          param: 'customer',
        });
    }
    const id = newId('cs_test', 58);
    const created = this.nowSeconds();
    const session: StripeObject = {
      id,
      object: 'checkout.session',
      amount_subtotal: fields.amount,
      amount_total: fields.amount,
      cancel_url: fields.cancelUrl ?? null,
      client_reference_id: fields.clientReferenceId ?? null,
      created,
      currency: fields.currency,
      customer: fields.customer ?? null,
      customer_creation: fields.customer ? null : (fields.customerCreation ?? 'if_required'),
      expires_at: created + 24 * 3600,
      livemode: false,
      metadata: fields.metadata,
      mode: 'payment',
      // Created when the customer pays (Stripe creates a session's PaymentIntent lazily).
      payment_intent: null,
      payment_status: 'unpaid',
      status: 'open',
      success_url: fields.successUrl,
      url: `${fields.baseUrl}/checkout/${id}`,
    };
    this.sessions.set(id, session);
    this.intentMetadata.set(id, fields.intentMetadata);
    if (fields.setupFutureUsage) this.setupFutureUsage.set(id, fields.setupFutureUsage);
    return session;
  }

  /**
   * The customer pays the session: by card (paid at once), or by an asynchronous method (a bank
   * debit: the session completes unpaid, and settleAsync decides later). Returns once the events are
   * delivered (or held).
   */
  async pay(sessionId: string, method: 'card' | 'async' = 'card'): Promise<StripeObject> {
    const session = this.session(sessionId);
    if (session.status !== 'open')
      throw new StripeApiError(400, `Checkout session ${sessionId} is ${String(session.status)}`, {
        code: 'checkout_session_not_open',
      });
    const intent: StripeObject = {
      id: newId('pi'),
      object: 'payment_intent',
      amount: session.amount_total,
      amount_received: 0,
      currency: session.currency,
      created: this.nowSeconds(),
      latest_charge: null,
      livemode: false,
      metadata: { ...this.intentMetadata.get(sessionId) },
      status: 'processing',
      customer: null,
      payment_method: null,
      setup_future_usage: this.setupFutureUsage.get(sessionId) ?? null,
    };
    this.paymentIntents.set(intent.id, intent);
    // The card the customer typed (always Stripe's test Visa): a PaymentMethod; with
    // `customer_creation: always` a new Customer, to which `setup_future_usage` attaches the card,
    // and with `customer` that one.
    const card = this.newCard();
    intent.payment_method = card.id;
    if (typeof session.customer === 'string') {
      intent.customer = session.customer;
      if (intent.setup_future_usage) card.customer = session.customer;
    } else if (session.customer_creation === 'always') {
      const customer: StripeObject = {
        id: newId('cus', 14),
        object: 'customer',
        created: this.nowSeconds(),
        livemode: false,
        metadata: {},
      };
      this.customers.set(customer.id, customer);
      this.indexCustomer(customer);
      session.customer = customer.id;
      intent.customer = customer.id;
      if (intent.setup_future_usage) card.customer = customer.id;
    }
    Object.assign(session, { status: 'complete', payment_intent: intent.id });
    if (method === 'card') {
      this.succeed(session, intent);
      await this.emit('checkout.session.completed', session);
    } else {
      await this.emit('checkout.session.completed', session);
    }
    return session;
  }

  /** The asynchronous payment of a completed, unpaid session succeeds or fails. */
  async settleAsync(sessionId: string, outcome: 'succeeded' | 'failed'): Promise<StripeObject> {
    const session = this.session(sessionId);
    const intent = this.retrieve(this.paymentIntents, 'payment_intent', String(session.payment_intent));
    if (session.payment_status !== 'unpaid' || intent.status !== 'processing')
      throw new StripeApiError(400, `session ${sessionId} has no payment awaiting its outcome`);
    if (outcome === 'succeeded') {
      this.succeed(session, intent);
      await this.emit('checkout.session.async_payment_succeeded', session);
    } else {
      intent.status = 'requires_payment_method';
      await this.emit('checkout.session.async_payment_failed', session);
    }
    return session;
  }

  private succeed(session: StripeObject, intent: StripeObject): void {
    this.chargeIntent(intent);
    session.payment_status = 'paid';
    this.onSessionPaid?.(session);
  }

  private newCard(): StripeObject {
    const method: StripeObject = {
      id: newId('pm'),
      object: 'payment_method',
      type: 'card',
      card: { brand: 'visa', last4: '4242', exp_month: 12, exp_year: new Date().getUTCFullYear() + 3 },
      customer: null,
      created: this.nowSeconds(),
      livemode: false,
      metadata: {},
    };
    this.paymentMethods.set(method.id, method);
    return method;
  }

  /** The PaymentIntent as retrieved, its `payment_method` expanded when asked (`expand[]=payment_method`). */
  retrieveIntent(id: string, expand: string[]): StripeObject {
    const intent = this.retrieve(this.paymentIntents, 'payment_intent', id);
    if (!expand.includes('payment_method') || typeof intent.payment_method !== 'string') return intent;
    return {
      ...intent,
      payment_method: this.paymentMethods.get(intent.payment_method) ?? intent.payment_method,
    };
  }

  /**
   * `DELETE /v1/customers/:id`, as Stripe does: the answer and later retrievals are the deleted stub
   * (`deleted: true`), its payment methods are detached, and a PaymentIntent naming it is refused
   * (400 `resource_missing`, param `customer`, "No such customer").
   */
  deleteCustomer(id: string): StripeObject {
    const customer = this.retrieve(this.customers, 'customer', id);
    if (customer.deleted)
      throw new StripeApiError(404, `No such customer: '${id}'`, { code: 'resource_missing', param: 'id' });
    const stub: StripeObject = { id, object: 'customer', deleted: true };
    this.customers.set(id, stub);
    for (const method of this.paymentMethods.values()) if (method.customer === id) method.customer = null;
    return snapshot(stub);
  }

  /**
   * `POST /v1/payment_methods/:id/detach`, as Stripe does: the payment method, its `customer` now
   * null; it can no longer be used for a payment (a PaymentIntent naming it with the customer is a
   * 400 `invalid_request_error`, param `payment_method`).
   */
  detachPaymentMethod(id: string): StripeObject {
    const method = this.retrieve(this.paymentMethods, 'payment_method', id);
    if (!method.customer)
      throw new StripeApiError(
        400,
        'The payment method you provided is not attached to a customer so detachment is impossible.',
        { param: 'payment_method' },
      );
    method.customer = null;
    return snapshot(method);
  }

  /** The next confirmed off-session payment is declined so (a test control); once. */
  failNextOffSession(outcome: Exclude<OffSessionOutcome, 'succeed'>): void {
    this.nextOffSession = outcome;
  }

  /**
   * `POST /v1/payment_intents` with an `Idempotency-Key`: Stripe keeps the first request's answer for
   * the key, success or error, and answers a repeat with the same parameters with it (nothing made
   * twice), a repeat with other parameters with a 400 idempotency_error.
   */
  idempotently(
    key: string | undefined,
    params: unknown,
    make: () => { status: number; body: unknown },
  ): { status: number; body: unknown; replayed: boolean } {
    const text = JSON.stringify(params);
    const known = key ? this.idempotent.get(key) : undefined;
    if (known) {
      if (known.params !== text)
        throw new StripeApiError(
          400,
          `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`,
          { type: 'idempotency_error' },
        );
      return { status: known.status, body: known.body, replayed: true };
    }
    let answer: { status: number; body: unknown };
    try {
      answer = make();
    } catch (error) {
      if (!(error instanceof StripeApiError) || error.statusCode >= 500) throw error;
      answer = { status: error.statusCode, body: error.toBody() };
    }
    if (key) this.idempotent.set(key, { params: text, ...answer });
    return { ...answer, replayed: false };
  }

  /**
   * A PaymentIntent created and, with `confirm` and `off_session`, confirmed on the customer's saved
   * card at once, as Stripe does: it succeeds (a charge; `payment_intent.succeeded` follows), or is
   * declined (the next-off-session control): Stripe answers 402 with a `card_error` whose `code` is
   * `card_declined` or `authentication_required` and whose `payment_intent` is the PaymentIntent, left
   * in `requires_payment_method` with its `last_payment_error`; `payment_intent.payment_failed` follows.
   * Events are sent after the answer, as Stripe's arrive on their own schedule.
   */
  createIntent(fields: {
    amount: number;
    currency: string | undefined;
    customer: string | undefined;
    paymentMethod: string | undefined;
    confirm: boolean;
    offSession: boolean;
    metadata: Record<string, string>;
  }): { status: number; body: unknown } {
    if (!Number.isSafeInteger(fields.amount) || fields.amount < 50)
      throw new StripeApiError(400, 'Amount must be at least $0.50 usd', {
        param: 'amount',
        code: 'amount_too_small',
      });
    if (!fields.currency)
      throw new StripeApiError(400, 'Missing required param: currency.', { param: 'currency' });
    const customer = fields.customer ? this.customers.get(fields.customer) : undefined;
    if (fields.customer && (!customer || customer.deleted))
      throw new StripeApiError(400, `No such customer: '${fields.customer}'`, {
        param: 'customer',
        code: 'resource_missing',
      });
    const method = fields.paymentMethod ? this.paymentMethods.get(fields.paymentMethod) : undefined;
    if (fields.paymentMethod && !method)
      throw new StripeApiError(400, `No such PaymentMethod: '${fields.paymentMethod}'`, {
        param: 'payment_method',
        code: 'resource_missing',
      });
    if (method && method.customer !== (fields.customer ?? null))
      throw new StripeApiError(
        400,
        'The provided PaymentMethod was previously used with a PaymentIntent without Customer attachment, shared with a connected account without Customer attachment, or was detached from a Customer. It may not be used again.',
        { param: 'payment_method' },
      );
    if (fields.offSession && !fields.confirm)
      throw new StripeApiError(400, 'off_session can only be used with confirm=true', {
        param: 'off_session',
      });
    const intent: StripeObject = {
      id: newId('pi'),
      object: 'payment_intent',
      amount: fields.amount,
      amount_received: 0,
      currency: fields.currency,
      created: this.nowSeconds(),
      customer: fields.customer ?? null,
      latest_charge: null,
      last_payment_error: null,
      livemode: false,
      metadata: fields.metadata,
      payment_method: fields.paymentMethod ?? null,
      status: fields.confirm ? 'processing' : 'requires_confirmation',
    };
    this.paymentIntents.set(intent.id, intent);
    if (!fields.confirm) return { status: 200, body: snapshot(intent) };
    const outcome = fields.offSession ? this.nextOffSession : 'succeed';
    this.nextOffSession = 'succeed';
    if (outcome === 'succeed') {
      this.chargeIntent(intent);
      this.background(this.emit('payment_intent.succeeded', intent));
      return { status: 200, body: snapshot(intent) };
    }
    const decline = DECLINES[outcome];
    const error = {
      type: 'card_error',
      code: outcome,
      decline_code: decline.decline_code,
      message: decline.message,
      doc_url: `https://stripe.com/docs/error-codes/${outcome.replaceAll('_', '-')}`,
      payment_method: method ? snapshot(method) : null,
    };
    Object.assign(intent, { status: 'requires_payment_method', last_payment_error: error });
    this.background(this.emit('payment_intent.payment_failed', intent));
    return { status: 402, body: { error: { ...error, payment_intent: snapshot(intent) } } };
  }

  /** A succeeded charge of the whole PaymentIntent. */
  private chargeIntent(intent: StripeObject): void {
    const charge: StripeObject = {
      id: newId('ch'),
      object: 'charge',
      amount: intent.amount,
      amount_captured: intent.amount,
      amount_refunded: 0,
      captured: true,
      created: this.nowSeconds(),
      currency: intent.currency,
      disputed: false,
      livemode: false,
      // Left empty: the webhook must find the account through the PaymentIntent, whatever Stripe copies.
      metadata: {},
      paid: true,
      payment_intent: intent.id,
      payment_method: intent.payment_method ?? null,
      refunded: false,
      status: 'succeeded',
    };
    this.charges.set(charge.id, charge);
    Object.assign(intent, { status: 'succeeded', amount_received: intent.amount, latest_charge: charge.id });
  }

  /** Refunds `cents` (default: all that remains) of a charge (by its id or its PaymentIntent's): `charge.refunded`. */
  async refund(chargeOrIntent: string, cents?: number): Promise<StripeObject> {
    const charge = this.chargeOf(chargeOrIntent);
    const remaining = Number(charge.amount) - Number(charge.amount_refunded);
    const amount = cents ?? remaining;
    if (!Number.isSafeInteger(amount) || amount <= 0)
      throw new StripeApiError(400, 'Invalid positive integer', { param: 'amount' });
    if (amount > remaining)
      throw new StripeApiError(
        400,
        `Refund amount ($${(amount / 100).toFixed(2)}) is greater than unrefunded amount on charge ($${(remaining / 100).toFixed(2)})`,
        { param: 'amount', code: 'amount_too_large' },
      );
    const refund: StripeObject = {
      id: newId('re'),
      object: 'refund',
      amount,
      charge: charge.id,
      created: this.nowSeconds(),
      currency: charge.currency,
      metadata: {},
      payment_intent: charge.payment_intent,
      status: 'succeeded',
    };
    this.refunds.set(refund.id, refund);
    charge.amount_refunded = Number(charge.amount_refunded) + amount;
    charge.refunded = charge.amount_refunded === charge.amount;
    await this.emit('charge.refunded', charge);
    return refund;
  }

  /** The cardholder disputes a charge (default: its whole amount): `charge.dispute.created`. */
  async dispute(chargeOrIntent: string, cents?: number): Promise<StripeObject> {
    const charge = this.chargeOf(chargeOrIntent);
    const dispute: StripeObject = {
      id: newId('dp'),
      object: 'dispute',
      amount: cents ?? charge.amount,
      charge: charge.id,
      created: this.nowSeconds(),
      currency: charge.currency,
      is_charge_refundable: false,
      livemode: false,
      metadata: {},
      payment_intent: charge.payment_intent,
      reason: 'fraudulent',
      status: 'needs_response',
    };
    this.disputes.set(dispute.id, dispute);
    charge.disputed = true;
    await this.emit('charge.dispute.created', dispute);
    return dispute;
  }

  /** Refunds of a charge (or of all charges), newest first, as Stripe lists them. */
  listRefunds(filter: { charge?: string | undefined; paymentIntent?: string | undefined }): StripeObject[] {
    return [...this.refunds.values()]
      .filter(
        (r) =>
          (!filter.charge || r.charge === filter.charge) &&
          (!filter.paymentIntent || r.payment_intent === filter.paymentIntent),
      )
      .reverse();
  }

  // --- events -------------------------------------------------------------------------------------

  /** Makes an event of `object` as it is now and delivers it (or holds it). */
  async emit(type: string, object: StripeObject): Promise<SentEvent> {
    const event: StripeObject = {
      id: newId('evt'),
      object: 'event',
      api_version: Stripe.API_VERSION,
      created: this.nowSeconds(),
      data: { object: snapshot(object) },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type,
    };
    const sent = { id: event.id, type, event };
    this.events.push(sent);
    this.delivery.set(event.id, { attempts: 0, nextAt: undefined, delivered: false });
    if (this.held) this.held.push(sent);
    else await this.deliver(sent, 'stripe');
    return sent;
  }

  /** Sends an event made earlier once more (Stripe's duplicate delivery, or a retry). */
  async resend(eventId: string): Promise<Delivery> {
    const sent = this.events.find((e) => e.id === eventId);
    if (!sent) throw new StripeApiError(404, `No such event: '${eventId}'`, { code: 'resource_missing' });
    return this.deliver(sent, 'resend');
  }

  /** From now on, events are kept instead of sent, until release. */
  hold(): void {
    this.held ??= [];
  }

  /**
   * Sends the held events, one after another, in the order they were made, in reverse, or in the
   * order of the ids given (an id may be given twice: sent twice); then stops holding.
   */
  async release(order: 'made' | 'reverse' | string[] = 'made'): Promise<Delivery[]> {
    const held = this.held ?? [];
    this.held = undefined;
    const byId = new Map(held.map((e) => [e.id, e]));
    const sequence =
      order === 'made'
        ? held
        : order === 'reverse'
          ? [...held].reverse()
          : order.map((id) => {
              const event = byId.get(id);
              if (!event) throw new Error(`event ${id} is not held`);
              return event;
            });
    const deliveries: Delivery[] = [];
    for (const event of sequence) deliveries.push(await this.deliver(event, 'stripe'));
    return deliveries;
  }

  /**
   * The events Stripe still keeps (made in the last 30 days on the stand-in's clock), newest first,
   * each as it is now (`pending_webhooks`: 0 once delivered, else 1: the stand-in has one endpoint),
   * with whether its delivery succeeded.
   */
  retainedEvents(): { event: StripeObject; delivered: boolean }[] {
    const oldest = this.nowMs() - EVENT_RETENTION_MS;
    return this.events
      .filter((sent) => Number(sent.event.created) * 1000 >= oldest)
      .reverse()
      .map((sent) => ({
        event: snapshot(sent.event),
        delivered: this.delivery.get(sent.id)?.delivered ?? false,
      }));
  }

  /** An event Stripe still keeps, as it is now. */
  retrieveEvent(id: string): StripeObject {
    const found = this.retainedEvents().find((e) => e.event.id === id);
    if (!found)
      throw new StripeApiError(404, `No such event: '${id}'`, { code: 'resource_missing', param: 'id' });
    return found.event;
  }

  /** Whether an event's delivery succeeded, and when its next automatic attempt is due (none: not retried). */
  deliveryOf(id: string): { delivered: boolean; attempts: number; nextAt: number | undefined } | undefined {
    const state = this.delivery.get(id);
    return state ? { ...state } : undefined;
  }

  /** The events held now. */
  heldEvents(): SentEvent[] {
    return [...(this.held ?? [])];
  }

  /** Resolves once no delivery is under way. */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  /** Delivers in the background (the checkout page's Pay button does not wait for the webhook). */
  background(work: Promise<unknown>): void {
    const tracked = work.catch(() => {}).finally(() => this.inFlight.delete(tracked));
    this.inFlight.add(tracked);
  }

  private async deliver(sent: SentEvent, by: Delivery['by']): Promise<Delivery> {
    const work = this.post(sent, by);
    this.background(work);
    return work;
  }

  /**
   * After an attempt: a 2xx delivers the event (`pending_webhooks` 0, never sent again); a failed
   * attempt of Stripe's own is retried on RETRY_POLICY's schedule, until 3 days after the event was
   * made. A failed resend changes nothing of the schedule.
   */
  private settle(sent: SentEvent, by: Delivery['by'], status: number, attemptedAt: number): void {
    const state = this.delivery.get(sent.id);
    if (!state || state.delivered) return;
    if (status >= 200 && status < 300) {
      Object.assign(state, { delivered: true, nextAt: undefined });
      sent.event.pending_webhooks = 0;
      return;
    }
    if (by !== 'stripe') return;
    state.attempts += 1;
    const at = attemptedAt + retryWaitMs(state.attempts);
    const lastAt = Number(sent.event.created) * 1000 + RETRY_POLICY.giveUpAfterMs;
    state.nextAt = at <= lastAt ? at : undefined;
  }

  private async post(sent: SentEvent, by: Delivery['by']): Promise<Delivery> {
    if (this.delayMs > 0) await sleep(this.delayMs);
    const url = this.settings.webhookUrl;
    const at = this.nowMs();
    const record = (status: number, body: string) => {
      this.settle(sent, by, status, at);
      const delivery = { eventId: sent.id, type: sent.type, status, body, by, at };
      this.deliveries.push(delivery);
      return delivery;
    };
    if (!url) return record(0, 'no webhook URL set');
    // Stripe signs the exact bytes it sends: `t=<timestamp>,v1=<HMAC-SHA256 of "t.payload">`.
    const payload = JSON.stringify(sent.event, null, 2);
    const signature = Stripe.webhooks.generateTestHeaderString({
      payload,
      secret: this.settings.webhookSecret,
    });
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json; charset=utf-8',
          'stripe-signature': signature,
          'user-agent': 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
        },
        body: payload,
        signal: AbortSignal.timeout(30_000),
      });
      return record(response.status, await response.text());
    } catch (error) {
      return record(0, error instanceof Error ? error.message : String(error));
    }
  }
}
