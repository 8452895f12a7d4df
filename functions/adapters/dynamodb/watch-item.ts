/**
 * The balance watch's items of the dashboard table, read and written: a `watch#<accountId>` item as
 * the WatchStore's Watch (watch.ts lists its attributes), a settings change's update, an outbox item.
 */
import type { NewMessage, Watch } from '../../core/watch.js';
import { type Item, S } from './items.js';

const num = (item: Item, name: string): number | undefined =>
  item[name]?.N === undefined ? undefined : Number(item[name]?.N);
export const str = (item: Item, name: string): string | undefined => item[name]?.S || undefined;

export function toWatch(item: Item): Watch {
  const accountId = str(item, 'accountId') ?? String(item.id?.S).slice('watch#'.length);
  const watch: Watch = {
    accountId,
    alertState: item.alertState?.S === 'sent' ? 'sent' : 'armed',
    alertSeq: num(item, 'alertSeq') ?? 0,
    topUpSeq: num(item, 'topUpSeq') ?? 0,
  };
  const email = str(item, 'email');
  if (email) watch.email = email;
  const threshold = num(item, 'thresholdCents');
  if (threshold !== undefined) watch.thresholdCents = threshold;
  const customer = str(item, 'stripeCustomer');
  const below = num(item, 'autoBelowCents');
  if (below !== undefined || customer) {
    watch.autoTopUp = {
      belowCents: below ?? 0,
      buyCents: num(item, 'autoBuyCents') ?? 0,
      enabled: item.autoEnabled?.BOOL === true,
    };
    const optional = {
      customer,
      paymentMethod: str(item, 'paymentMethod'),
      cardBrand: str(item, 'cardBrand'),
      cardLast4: str(item, 'cardLast4'),
      offReason: str(item, 'autoOffReason'),
      offAt: str(item, 'autoOffAt'),
    };
    for (const [key, value] of Object.entries(optional))
      if (value !== undefined) (watch.autoTopUp as unknown as Record<string, unknown>)[key] = value;
  }
  if (str(item, 'levelsAt')) watch.levelsCopied = true;
  const inFlight = num(item, 'inFlightSeq');
  if (inFlight !== undefined) {
    watch.inFlight = { seq: inFlight, startedAt: str(item, 'inFlightAt') ?? '' };
    const intent = str(item, 'inFlightIntent');
    if (intent) watch.inFlight.paymentIntent = intent;
  }
  return watch;
}

/** What every change of a customer's settings sets: listed in the index, its account, when, and where to e-mail. */
export function settingsUpdate(accountId: string, email: string | undefined, now: string) {
  const sets = ['watchList = :list', 'accountId = :account', 'updatedAt = :now'];
  const values: Item = { ':list': S('watch'), ':account': S(accountId), ':now': S(now) };
  if (email) {
    sets.push('email = :email');
    values[':email'] = S(email);
  }
  return { sets, values };
}

/** A queued e-mail's item, on the outbox index (watch-outbox.ts sends it). */
export function outboxItem(id: string, accountId: string, message: NewMessage, now: string): Item {
  return {
    id: S(id),
    watchList: S('outbox'),
    accountId: S(accountId),
    to: S(message.to),
    subject: S(message.subject),
    text: S(message.text),
    createdAt: S(now),
  };
}
