/**
 * The balance watch's port: per account, a low-balance alert and an auto top-up, each a small state
 * machine whose every transition is one conditional write (so two runs of the watch at once, or a run
 * and a webhook, act once), and an outbox of e-mails that a transition queues in the same write and
 * the watch sends afterwards (functions/balance-watch/watch.ts). Its one implementation on DynamoDB is
 * functions/adapters/dynamodb/watch.ts (items of the dashboard table), an in-memory one for unit tests
 * test/support/memory-watch.ts.
 *
 * Alert:      armed --(balance < threshold)--> sent (alertSeq + 1, an e-mail queued)
 *             sent  --(balance >= threshold)--> armed
 * Auto top-up (enabled, a card saved, nothing in flight):
 *             idle --(balance < below)--> in flight (topUpSeq + 1): one off-session PaymentIntent,
 *             idempotency key `auto-top-up:<accountId>:<seq>`
 *             in flight --(payment_intent.succeeded: credited by the webhook)--> idle
 *             in flight --(a decline, authentication_required, or a request Stripe refuses for good:
 *             the customer deleted, the card detached)--> idle, switched off with its reason, an
 *             e-mail queued
 */
import type { AuditEntry } from './team.js';

/** The alert's state: `armed` e-mails at the next crossing below the threshold; `sent` waits for a rise. */
type AlertState = 'armed' | 'sent';

/** The customer's auto top-up: "when below `belowCents`, buy `buyCents`", and the card it charges. */
interface AutoTopUp {
  belowCents: number;
  buyCents: number;
  enabled: boolean;
  /** The Stripe customer and payment method saved through Checkout (`setup_future_usage: off_session`). */
  customer?: string;
  paymentMethod?: string;
  cardBrand?: string;
  cardLast4?: string;
  /** Why it was switched off (a decline, authentication required), for the Billing page. */
  offReason?: string;
  offAt?: string;
}

/** The one top-up in flight of an account: its sequence number and, once known, its PaymentIntent. */
interface InFlightTopUp {
  seq: number;
  startedAt: string;
  paymentIntent?: string;
}

export interface Watch {
  accountId: string;
  /** Where the e-mails go: the address of the user who saved the settings (the ID token's `email`). */
  email?: string;
  /** The alert's threshold; absent: no alert. */
  thresholdCents?: number;
  alertState: AlertState;
  /** How many alerts were sent (the outbox item of the n-th is `outbox#<accountId>#alert-<n>`). */
  alertSeq: number;
  autoTopUp?: AutoTopUp;
  /** How many auto top-ups were started (the idempotency key's sequence number). */
  topUpSeq: number;
  inFlight?: InFlightTopUp;
}

/** An e-mail waiting in the outbox: sent by the watch, deleted once SES accepted it. */
export interface OutboxMessage {
  id: string;
  accountId: string;
  to: string;
  subject: string;
  text: string;
  createdAt: string;
  /** How many runs have tried to send it (each claim is one). */
  attempts: number;
}

export type NewMessage = Omit<OutboxMessage, 'id' | 'accountId' | 'createdAt' | 'attempts'>;

/** An e-mail taken out of the outbox unsent: SES refused it for good, or it failed too many times. */
export interface DeadLetter extends OutboxMessage {
  reason: string;
  deadAt: string;
}

/** The card a Checkout with `setup_future_usage` saved. `from`: when its session was made (epoch s). */
export interface SavedCard {
  customer: string;
  paymentMethod: string;
  brand?: string;
  last4?: string;
  from: number;
}

export interface WatchStore {
  /** Every account with settings saved (a sparse index: no scan of the table). */
  listWatches(): Promise<Watch[]>;
  getWatch(accountId: string): Promise<Watch | undefined>;
  /**
   * Sets (or with undefined, removes) the alert's threshold; a new threshold is armed. With `audit`,
   * the entry is written in the same transaction (store-team.ts Audited).
   */
  setAlert(
    accountId: string,
    thresholdCents: number | undefined,
    email: string | undefined,
    now: string,
    audit?: AuditEntry,
  ): Promise<void>;
  /**
   * Saves "when below, buy" and the switch; switching on clears the last reason it was off. `message`
   * (the change told to the account's address) is queued in the same write.
   */
  setAutoTopUp(
    accountId: string,
    settings: { belowCents: number; buyCents: number; enabled: boolean },
    email: string | undefined,
    now: string,
    message?: NewMessage,
    audit?: AuditEntry,
  ): Promise<void>;
  /** Queues an e-mail of the account that no transition sends (a key created on the dashboard). */
  queueMessage(accountId: string, message: NewMessage, now: string): Promise<void>;
  /** Records the card a save-card Checkout saved, unless a newer one was recorded already. */
  recordCard(accountId: string, card: SavedCard, now: string): Promise<void>;

  /** armed with `seq` -> sent with seq + 1, and `message` (if any) queued in the same write. */
  alertSent(accountId: string, seq: number, message: NewMessage | undefined, now: string): Promise<boolean>;
  /** sent with `seq` -> armed. */
  rearm(accountId: string, seq: number): Promise<boolean>;
  /** Nothing in flight, enabled, topUpSeq = seq - 1 -> in flight with `seq`. */
  beginTopUp(accountId: string, seq: number, now: string): Promise<boolean>;
  /** The in-flight top-up `seq`'s PaymentIntent, once Stripe answered. */
  recordIntent(accountId: string, seq: number, paymentIntent: string): Promise<boolean>;
  /** In flight with `seq` -> idle (its payment succeeded and was credited). */
  finishTopUp(accountId: string, seq: number): Promise<boolean>;
  /** In flight with `seq` -> idle and switched off with `reason`, `message` (if any) queued. */
  switchOff(
    accountId: string,
    seq: number,
    reason: string,
    message: NewMessage | undefined,
    now: string,
  ): Promise<boolean>;

  /** The outbox, oldest first. */
  pendingMessages(): Promise<OutboxMessage[]>;
  /**
   * Takes a message to send until `untilMs`, unless another run holds it (a lease: a crash resends)
   * or it left the outbox; resolves with the attempt this claim starts (1 for the first), or undefined.
   */
  claimMessage(id: string, untilMs: number, nowMs: number): Promise<number | undefined>;
  deleteMessage(id: string): Promise<void>;
  /** Out of the outbox (never sent again) into the dead letters, with why; false if it was not in the outbox. */
  deadLetter(id: string, reason: string, now: string): Promise<boolean>;
  /** The dead letters, oldest first (for the operator). */
  deadLetters(): Promise<DeadLetter[]>;

  /** The e-mail address an OpenID subject signed in with last (its ID token's `email`). */
  rememberEmail(subject: string, email: string, now: string): Promise<void>;
  emailOf(subject: string): Promise<string | undefined>;
}

/** The outbox item ids: one per alert and one per switch-off, by the account's sequence numbers. */
export const alertMessageId = (accountId: string, seq: number) => `outbox#${accountId}#alert-${seq}`;
export const topUpMessageId = (accountId: string, seq: number) => `outbox#${accountId}#topup-${seq}`;

/** The outbox item id of an e-mail that tells of a change on the dashboard (each its own). */
export const changeMessageId = (accountId: string, unique: string) => `outbox#${accountId}#change-${unique}`;

/** Stripe's idempotency key of the n-th auto top-up of an account: a retry gets the first answer. */
export const autoTopUpIdempotencyKey = (accountId: string, seq: number) => `auto-top-up:${accountId}:${seq}`;

/** The PaymentIntent metadata `kind` of an auto top-up, and of the Checkout that saves its card. */
export const AUTO_TOP_UP_KIND = 'auto_top_up';
export const SAVE_CARD_KIND = 'save_card';

/** `$12.34` from whole cents. */
const dollars = (cents: number) =>
  `$${Math.floor(cents / 100).toLocaleString('en-US')}.${String(cents % 100).padStart(2, '0')}`;

/**
 * The account as its customer knows it in an e-mail: by the address they set the e-mail up with,
 * never by its id (a dashboard account's `acct-<hex>` is shown to them nowhere).
 */
export const yourAccount = (email: string): string => `your account (${email})`;

/**
 * The e-mail that tells the account a key was created on it: a session taken over (a stolen cookie)
 * cannot make one without the owner hearing of it.
 */
export function keyCreatedMessage(to: string, keyName: string, at: string): NewMessage {
  return {
    to,
    subject: 'A new API key was created on your account',
    text: [
      `A key named "${keyName}" was created on ${yourAccount(to)} at ${at}.`,
      '',
      'If this was not you, revoke it on the dashboard (Settings → API), and change your password.',
    ].join('\n'),
  };
}

/** The e-mail that tells the account its auto top-up was changed, and to what. */
export function autoTopUpChangedMessage(
  to: string,
  settings: { belowCents: number; buyCents: number; enabled: boolean },
  at: string,
): NewMessage {
  const state = settings.enabled
    ? `on: when the balance is below ${dollars(settings.belowCents)}, your saved card is charged ${dollars(settings.buyCents)}`
    : `off (when below ${dollars(settings.belowCents)}, buy ${dollars(settings.buyCents)})`;
  return {
    to,
    subject: 'Auto top-up was changed on your account',
    text: [
      `Auto top-up was changed on ${yourAccount(to)} at ${at}: it is now ${state}.`,
      '',
      'If this was not you, switch it off on the dashboard (Billing), and change your password.',
    ].join('\n'),
  };
}

/** The e-mail that says auto top-up was switched off, and why (the watch's path and the webhook's). */
export function switchedOffMessage(
  watch: Pick<Watch, 'accountId' | 'email'>,
  buyCents: number,
  reason: string,
  billingUrl: string | undefined,
): NewMessage | undefined {
  if (!watch.email) return undefined;
  return {
    to: watch.email,
    subject: 'Auto top-up is switched off: the card was not charged',
    text: [
      `Auto top-up of ${dollars(buyCents)} for ${yourAccount(watch.email)} could not charge your saved card, and is now switched off.`,
      `Stripe said: ${reason}`,
      '',
      `Buy credits, or switch it on again (or save another card): ${billingUrl ?? 'the Billing page of your dashboard'}`,
    ].join('\n'),
  };
}
