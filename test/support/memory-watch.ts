/**
 * An in-memory WatchStore (functions/core/watch.ts) for unit tests: each transition checks its
 * condition and applies whole, as the DynamoDB one's conditional writes and transactions do, so two
 * runs interleaved at any await act once.
 */
import { randomUUID } from 'node:crypto';
import type { AuditEntry } from '../../functions/core/team.js';
import {
  alertMessageId,
  changeMessageId,
  type DeadLetter,
  type NewMessage,
  type OutboxMessage,
  type SavedCard,
  topUpMessageId,
  type Watch,
  type WatchStore,
} from '../../functions/core/watch.js';

export class MemoryWatchStore implements WatchStore {
  readonly watches = new Map<string, Watch & { cardFrom?: number }>();
  readonly outbox = new Map<string, OutboxMessage & { claimedUntil?: number }>();
  readonly dead = new Map<string, DeadLetter>();
  readonly emails = new Map<string, string>();
  /** The audit entries of settings changes, written with them. */
  readonly audits: AuditEntry[] = [];

  private watch(accountId: string): Watch & { cardFrom?: number } {
    let watch = this.watches.get(accountId);
    if (!watch) {
      watch = { accountId, alertState: 'armed', alertSeq: 0, topUpSeq: 0 };
      this.watches.set(accountId, watch);
    }
    return watch;
  }

  private queue(id: string, accountId: string, message: NewMessage | undefined, now: string): boolean {
    if (!message) return true;
    if (this.outbox.has(id)) return false;
    this.outbox.set(id, { id, accountId, createdAt: now, attempts: 0, ...message });
    return true;
  }

  async listWatches(): Promise<Watch[]> {
    return [...this.watches.values()]
      .filter((w) => w.thresholdCents !== undefined || w.autoTopUp)
      .map((w) => structuredClone(w));
  }
  async getWatch(accountId: string): Promise<Watch | undefined> {
    const watch = this.watches.get(accountId);
    return watch ? structuredClone(watch) : undefined;
  }
  async setAlert(
    accountId: string,
    thresholdCents: number | undefined,
    email: string | undefined,
    _now: string,
    audit?: AuditEntry,
  ) {
    if (audit) this.audits.push(structuredClone(audit));
    const watch = this.watch(accountId);
    if (thresholdCents === undefined) delete watch.thresholdCents;
    else watch.thresholdCents = thresholdCents;
    watch.alertState = 'armed';
    if (email) watch.email = email;
  }
  async setAutoTopUp(
    accountId: string,
    settings: { belowCents: number; buyCents: number; enabled: boolean },
    email: string | undefined,
    now: string,
    message?: NewMessage,
    audit?: AuditEntry,
  ) {
    if (audit) this.audits.push(structuredClone(audit));
    this.queue(changeMessageId(accountId, randomUUID()), accountId, message, now);
    const watch = this.watch(accountId);
    const auto = { ...watch.autoTopUp, ...settings };
    if (settings.enabled) {
      delete auto.offReason;
      delete auto.offAt;
    }
    watch.autoTopUp = auto;
    if (email) watch.email = email;
  }
  async queueMessage(accountId: string, message: NewMessage, now: string) {
    this.queue(changeMessageId(accountId, randomUUID()), accountId, message, now);
  }
  async recordCard(accountId: string, card: SavedCard, _now: string) {
    const watch = this.watch(accountId);
    if (watch.cardFrom !== undefined && watch.cardFrom > card.from) return;
    watch.cardFrom = card.from;
    watch.autoTopUp = {
      belowCents: 0,
      buyCents: 0,
      enabled: false,
      ...watch.autoTopUp,
      customer: card.customer,
      paymentMethod: card.paymentMethod,
      ...(card.brand ? { cardBrand: card.brand } : {}),
      ...(card.last4 ? { cardLast4: card.last4 } : {}),
    };
  }
  async alertSent(accountId: string, seq: number, message: NewMessage | undefined, now: string) {
    const watch = this.watches.get(accountId);
    if (watch?.alertState !== 'armed' || watch.alertSeq !== seq) return false;
    if (!this.queue(alertMessageId(accountId, seq + 1), accountId, message, now)) return false;
    watch.alertState = 'sent';
    watch.alertSeq = seq + 1;
    return true;
  }
  async rearm(accountId: string, seq: number) {
    const watch = this.watches.get(accountId);
    if (watch?.alertState !== 'sent' || watch.alertSeq !== seq) return false;
    watch.alertState = 'armed';
    return true;
  }
  async beginTopUp(accountId: string, seq: number, now: string) {
    const watch = this.watches.get(accountId);
    if (!watch?.autoTopUp?.enabled || watch.inFlight || watch.topUpSeq !== seq - 1) return false;
    watch.topUpSeq = seq;
    watch.inFlight = { seq, startedAt: now };
    return true;
  }
  async recordIntent(accountId: string, seq: number, paymentIntent: string) {
    const watch = this.watches.get(accountId);
    if (watch?.inFlight?.seq !== seq) return false;
    watch.inFlight.paymentIntent = paymentIntent;
    return true;
  }
  async finishTopUp(accountId: string, seq: number) {
    const watch = this.watches.get(accountId);
    if (watch?.inFlight?.seq !== seq) return false;
    delete watch.inFlight;
    return true;
  }
  async switchOff(
    accountId: string,
    seq: number,
    reason: string,
    message: NewMessage | undefined,
    now: string,
  ) {
    const watch = this.watches.get(accountId);
    if (watch?.inFlight?.seq !== seq || !watch.autoTopUp) return false;
    if (!this.queue(topUpMessageId(accountId, seq), accountId, message, now)) return false;
    delete watch.inFlight;
    watch.autoTopUp = { ...watch.autoTopUp, enabled: false, offReason: reason, offAt: now };
    return true;
  }
  async pendingMessages(): Promise<OutboxMessage[]> {
    return [...this.outbox.values()]
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt))
      .map(({ claimedUntil: _claimed, ...message }) => message);
  }
  async claimMessage(id: string, untilMs: number, nowMs: number) {
    const message = this.outbox.get(id);
    if (!message || (message.claimedUntil !== undefined && message.claimedUntil > nowMs)) return undefined;
    message.claimedUntil = untilMs;
    message.attempts += 1;
    return message.attempts;
  }
  async deleteMessage(id: string) {
    this.outbox.delete(id);
  }
  async deadLetter(id: string, reason: string, now: string) {
    const message = this.outbox.get(id);
    if (!message) return false;
    this.outbox.delete(id);
    const { claimedUntil: _claimed, ...rest } = message;
    this.dead.set(id, { ...rest, reason, deadAt: now });
    return true;
  }
  async deadLetters(): Promise<DeadLetter[]> {
    return [...this.dead.values()].sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }
  async rememberEmail(subject: string, email: string, _now: string) {
    this.emails.set(subject, email);
  }
  async emailOf(subject: string) {
    return this.emails.get(subject);
  }
}
