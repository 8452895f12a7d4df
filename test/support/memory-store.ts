/**
 * An in-memory implementation of the store port (functions/core/store.ts), for unit tests of the
 * request path without a database. It keeps the port's contract: conditional writes refuse or
 * succeed whole, a settlement is idempotent by generation id ('settled' only for the call that wrote
 * its entry), a hold is released once; an account's balance is one value (a split only counts its
 * slices), so its total is always read as of one instant.
 */

import { daysUpTo } from '../../functions/adapters/dynamodb/activity.js';
import type { AccountStatus, Principal } from '../../functions/core/access.js';
import { keyNameProblem } from '../../functions/core/keys.js';
import {
  AccountExistsError,
  AccountNotFoundError,
  type AccountPage,
  type AccountRecord,
  type ChargeEntry,
  type ChargePage,
  type CorrectionOutcome,
  correctionEntryId,
  cursorEntry,
  type DashboardSession,
  type DaySpend,
  type Hold,
  type HoldOutcome,
  KeyNotFoundError,
  type KeyRecord,
  type LedgerEntry,
  newestFirst,
  type SessionNotice,
  type SettleOutcome,
  type Store,
  TooManyKeysError,
  type Transfer,
  type TransferOutcome,
  topUpEntryId,
  utcDay,
} from '../../functions/core/store.js';
import type { Audited } from '../../functions/core/store-team.js';
import { byBytes } from '../../functions/core/strings.js';
import type { AuditEntry } from '../../functions/core/team.js';
import { MemoryTeam } from './memory-team.js';

export class MemoryStore extends MemoryTeam implements Store {
  readonly accounts = new Map<string, AccountRecord>();
  /** setAccountStatus causes applied, by account (a dispute suspends once). */
  private readonly statusCauses = new Map<string, Set<string>>();
  readonly keys = new Map<string, KeyRecord>();
  readonly ledger = new Map<string, LedgerEntry[]>();
  readonly holds = new Map<string, Hold>();
  /** The dashboard's sessions by hash, and OpenID subjects' accounts. */
  readonly sessions = new Map<string, DashboardSession>();
  readonly users = new Map<string, string>();
  /** Every call, by operation name: what a round-trip test counts. */
  readonly calls: string[] = [];
  /**
   * Each key's day counters (core/store.ts, "KEY DAILY CAPS"), by `<accountId>|<YYYY-MM-DD>|<keyId>`:
   * its charges of the day plus its capped holds, as the DynamoDB adapter keeps them on slice items
   * (an account here is one slice).
   */
  readonly keyDays = new Map<string, bigint>();

  private addKeyDay(accountId: string, day: string, keyId: string, nano: bigint): void {
    const at = `${accountId}|${day}|${keyId}`;
    this.keyDays.set(at, (this.keyDays.get(at) ?? 0n) + nano);
  }

  private keyDay(accountId: string, day: string, keyId: string): bigint {
    return this.keyDays.get(`${accountId}|${day}|${keyId}`) ?? 0n;
  }

  /** A capped hold's amount off its key's counter of the day it was placed. */
  private releaseKeyDay(hold: Hold): void {
    if (hold.keyId) this.addKeyDay(hold.accountId, utcDay(hold.createdAt), hold.keyId, -hold.amountNano);
  }

  async loadPrincipal(keyHash: string): Promise<Principal | undefined> {
    this.calls.push('loadPrincipal');
    const key = this.keys.get(keyHash);
    if (!key) return undefined;
    const account = this.accounts.get(key.accountId);
    const spentByDay: Record<string, bigint> = {};
    if (key.dailyCapNano !== undefined)
      for (const [at, nano] of this.keyDays) {
        const [accountId, day, keyId] = at.split('|');
        if (accountId === key.accountId && keyId === key.keyId && day) spentByDay[day] = nano;
      }
    return {
      keyId: key.keyId,
      accountId: key.accountId,
      keyStatus: key.status,
      accountStatus: account?.status ?? 'banned',
      balanceNano: account?.balanceNano ?? 0n,
      heldNano: account?.heldNano ?? 0n,
      // An account here is one slice, whatever a split recorded.
      ...(key.dailyCapNano !== undefined
        ? { keyCap: { capNano: key.dailyCapNano, slices: 1, spentByDay } }
        : {}),
    };
  }

  async placeHold(hold: Hold, options: { capShareNano?: bigint } = {}): Promise<HoldOutcome> {
    this.calls.push('placeHold');
    const account = this.accounts.get(hold.accountId);
    if (this.holds.has(hold.holdId)) return 'held';
    if (account === undefined) return 'banned';
    if (account.status !== 'active') return account.status;
    if (account.balanceNano - account.heldNano <= 0n) return 'refused';
    const day = utcDay(hold.createdAt);
    if (
      hold.keyId &&
      options.capShareNano !== undefined &&
      this.keyDay(hold.accountId, day, hold.keyId) >= options.capShareNano
    )
      return 'capped';
    if (hold.keyId) this.addKeyDay(hold.accountId, day, hold.keyId, hold.amountNano);
    account.heldNano += hold.amountNano;
    this.holds.set(hold.holdId, { ...hold });
    return 'held';
  }

  async settleCharge(entry: ChargeEntry, options: { hold?: Hold } = {}): Promise<SettleOutcome> {
    this.calls.push('settleCharge');
    const account = this.accounts.get(entry.accountId);
    if (!account) throw new AccountNotFoundError(entry.accountId);
    const entries = this.ledger.get(entry.accountId) ?? [];
    if (entries.some((e) => e.entryId === entry.generationId)) return 'already-settled';
    entries.push({
      entryId: entry.generationId,
      type: 'charge',
      createdAt: entry.createdAt,
      deltaNano: -entry.billedNano,
      tier: entry.tier,
      keyId: entry.keyId,
      promptTokens: entry.promptTokens,
      completionTokens: entry.completionTokens,
      cachedTokens: entry.cachedTokens,
      estimated: entry.estimated,
      ...(entry.user ? { user: entry.user } : {}),
      ...(entry.usageAdjusted ? { usageAdjusted: entry.usageAdjusted } : {}),
      ...(entry.finishReason ? { finishReason: entry.finishReason } : {}),
    });
    this.ledger.set(entry.accountId, entries);
    account.balanceNano -= entry.billedNano;
    this.addKeyDay(entry.accountId, utcDay(entry.createdAt), entry.keyId, entry.billedNano);
    const hold = options.hold && this.holds.get(options.hold.holdId);
    if (hold) {
      this.holds.delete(hold.holdId);
      account.heldNano -= hold.amountNano;
      this.releaseKeyDay(hold);
    }
    return 'settled';
  }

  async deferSettlement(
    entry: ChargeEntry,
    usageRecord: string,
    options: { hold?: Hold } = {},
  ): Promise<'deferred' | 'already-settled'> {
    this.calls.push('deferSettlement');
    if (this.ledger.get(entry.accountId)?.some((e) => e.entryId === entry.generationId))
      return 'already-settled';
    const live = this.holds.get(entry.generationId);
    if (live) Object.assign(live, { usageRecord, deferred: true });
    else
      this.holds.set(entry.generationId, {
        accountId: entry.accountId,
        holdId: entry.generationId,
        amountNano: 0n,
        expiresAt: options.hold?.expiresAt ?? Date.now(),
        createdAt: options.hold?.createdAt ?? new Date().toISOString(),
        usageRecord,
        deferred: true,
      });
    return 'deferred';
  }

  async releaseHold(
    hold: Hold,
    options: { onlyIfExpiredAt?: number; deadline?: number } = {},
  ): Promise<boolean> {
    this.calls.push('releaseHold');
    const live = this.holds.get(hold.holdId);
    if (!live) return false;
    if (options.onlyIfExpiredAt !== undefined && live.expiresAt > options.onlyIfExpiredAt) return false;
    this.holds.delete(hold.holdId);
    const account = this.accounts.get(hold.accountId);
    if (account) account.heldNano -= live.amountNano;
    this.releaseKeyDay(live);
    return true;
  }

  async recordUsageOnHold(hold: Hold, usageRecord: string): Promise<boolean> {
    this.calls.push('recordUsageOnHold');
    const live = this.holds.get(hold.holdId);
    if (!live) return false;
    live.usageRecord = usageRecord;
    return true;
  }

  async listHolds(accountId?: string): Promise<Hold[]> {
    return [...this.holds.values()]
      .filter((h) => accountId === undefined || h.accountId === accountId)
      .sort((a, b) => a.expiresAt - b.expiresAt);
  }

  /** An account kept whole has no slices to move credit between. */
  async listTransfers(): Promise<Transfer[]> {
    return [];
  }

  async completeTransfer(): Promise<TransferOutcome> {
    return 'gone';
  }

  async accountBalance(accountId: string): Promise<bigint | undefined> {
    return this.accounts.get(accountId)?.balanceNano;
  }

  async getAccount(accountId: string): Promise<AccountRecord | undefined> {
    const account = this.accounts.get(accountId);
    return account ? { ...account } : undefined;
  }

  async countNegativeBalances(): Promise<number> {
    return [...this.accounts.values()].filter((account) => account.balanceNano < 0n).length;
  }

  async listAccountIds(): Promise<string[]> {
    return [...this.accounts.keys()].sort();
  }

  async createAccount(accountId: string, initialCreditsNano: bigint, now: string): Promise<void> {
    if (this.accounts.has(accountId)) throw new AccountExistsError(accountId);
    this.accounts.set(accountId, {
      accountId,
      status: 'active',
      balanceNano: initialCreditsNano,
      heldNano: 0n,
      createdAt: now,
      slices: 1,
    });
    if (initialCreditsNano > 0n) {
      this.ledger.set(accountId, [
        {
          entryId: topUpEntryId('initial-credits'),
          type: 'topup',
          createdAt: now,
          deltaNano: initialCreditsNano,
          reference: 'initial-credits',
        },
      ]);
    }
  }

  /**
   * The in-memory store keeps each account whole (one balance, nothing to meet on): a split only
   * records the count, which the account record reports.
   */
  async splitAccount(accountId: string, slices: number): Promise<number> {
    const account = this.accounts.get(accountId);
    if (!account) throw new AccountNotFoundError(accountId);
    account.slices = Math.max(account.slices, slices);
    return account.slices;
  }

  async setAccountStatus(
    accountId: string,
    status: AccountStatus,
    _now?: string,
    options: { cause?: string } = {},
  ): Promise<boolean> {
    const account = this.accounts.get(accountId);
    if (!account) throw new AccountNotFoundError(accountId);
    if (options.cause !== undefined) {
      const causes = this.statusCauses.get(accountId) ?? new Set<string>();
      if (account.status !== 'active' || causes.has(options.cause)) return false;
      this.statusCauses.set(accountId, causes.add(options.cause));
    }
    account.status = status;
    return true;
  }

  async topUp(
    accountId: string,
    reference: string,
    amountNano: bigint,
    now: string,
    options: Audited = {},
  ): Promise<boolean> {
    const account = this.accounts.get(accountId);
    if (!account) throw new AccountNotFoundError(accountId);
    const entries = this.ledger.get(accountId) ?? [];
    if (entries.some((e) => e.entryId === topUpEntryId(reference))) return false;
    this.checkEntry(options.audit);
    this.record(options.audit);
    entries.push({
      entryId: topUpEntryId(reference),
      type: 'topup',
      createdAt: now,
      deltaNano: amountNano,
      reference,
    });
    this.ledger.set(accountId, entries);
    account.balanceNano += amountNano;
    return true;
  }

  async removeCredits(
    accountId: string,
    reference: string,
    amountNano: bigint,
    now: string,
    options: { force?: boolean } & Audited = {},
  ): Promise<CorrectionOutcome> {
    const account = this.accounts.get(accountId);
    if (!account) throw new AccountNotFoundError(accountId);
    const entries = this.ledger.get(accountId) ?? [];
    const entryId = correctionEntryId(reference);
    if (entries.some((e) => e.entryId === entryId)) return 'already-applied';
    if (!options.force && account.balanceNano - account.heldNano < amountNano) return 'refused';
    this.checkEntry(options.audit);
    this.record(options.audit);
    entries.push({ entryId, type: 'correction', createdAt: now, deltaNano: -amountNano, reference });
    this.ledger.set(accountId, entries);
    account.balanceNano -= amountNano;
    return 'applied';
  }

  /** Pages in account id order (the DynamoDB table's is its own). */
  async listAccounts({ limit, after }: { limit: number; after?: string }): Promise<AccountPage> {
    const ids = [...this.accounts.keys()].sort().filter((id) => after === undefined || id > after);
    const accounts = ids.slice(0, limit).flatMap((id) => {
      const account = this.accounts.get(id);
      return account ? [{ ...account }] : [];
    });
    const last = accounts.at(-1);
    return ids.length > limit && last ? { accounts, next: last.accountId } : { accounts };
  }

  /** The bound as the DynamoDB store keeps it: checked and the key stored in one step (no await between). */
  async createKey(key: KeyRecord, options: { maxActive?: number } & Audited = {}): Promise<void> {
    if (!this.accounts.has(key.accountId)) throw new AccountNotFoundError(key.accountId);
    const active = [...this.keys.values()].filter(
      (k) => k.accountId === key.accountId && k.status === 'active',
    ).length;
    if (options.maxActive !== undefined && active >= options.maxActive)
      throw new TooManyKeysError(key.accountId, options.maxActive);
    this.checkEntry(options.audit);
    this.keys.set(key.keyHash, structuredClone(key));
    this.record(options.audit);
  }

  async findKeyById(keyId: string): Promise<KeyRecord | undefined> {
    return [...this.keys.values()].find((k) => k.keyId === keyId);
  }

  /** The entry only with a change: a key revoked already is left as it was, and no entry written. */
  async revokeKey(keyHash: string, now: string, options: Audited = {}): Promise<KeyRecord> {
    const key = this.keys.get(keyHash);
    if (!key) throw new Error('no such key');
    if (key.status === 'active') {
      this.checkEntry(options.audit);
      this.record(options.audit);
    }
    key.status = 'revoked';
    key.revokedAt ??= now;
    return { ...key };
  }

  async listKeys(accountId: string): Promise<KeyRecord[]> {
    return [...this.keys.values()].filter((k) => k.accountId === accountId);
  }

  async setKeyDailyCap(
    accountId: string,
    keyId: string,
    capNano: bigint | undefined,
    options: Audited = {},
  ): Promise<KeyRecord> {
    if (capNano !== undefined && capNano <= 0n) throw new RangeError('a daily cap must be above zero');
    const key = [...this.keys.values()].find((k) => k.keyId === keyId);
    if (!key || key.accountId !== accountId) throw new KeyNotFoundError(keyId);
    this.checkEntry(options.audit);
    this.record(options.audit);
    if (capNano === undefined) delete key.dailyCapNano;
    else key.dailyCapNano = capNano;
    return { ...key };
  }

  async renameKey(accountId: string, keyId: string, name: string, audit: AuditEntry): Promise<void> {
    const problem = keyNameProblem(name);
    if (problem) throw new RangeError(problem);
    const key = [...this.keys.values()].find((k) => k.keyId === keyId);
    if (!key || key.accountId !== accountId) throw new KeyNotFoundError(keyId);
    this.checkEntry(audit);
    key.name = name;
    this.record(audit);
  }

  async keyDailySpend(accountId: string, keyId: string, day: string): Promise<bigint> {
    return this.keyDay(accountId, day, keyId);
  }

  async keysDailySpend(
    accountId: string,
    keyIds: readonly string[],
    day: string,
  ): Promise<Map<string, bigint>> {
    return new Map(keyIds.map((keyId) => [keyId, this.keyDay(accountId, day, keyId)]));
  }

  async getKey(keyHash: string): Promise<KeyRecord | undefined> {
    const key = this.keys.get(keyHash);
    return key ? { ...key } : undefined;
  }

  /** The key's charges in the ledger: the in-memory store keeps no running totals. */
  async keyUsage(accountId: string, keyId: string): Promise<bigint> {
    return (this.ledger.get(accountId) ?? [])
      .filter((e) => e.type === 'charge' && e.keyId === keyId)
      .reduce((sum, e) => sum - e.deltaNano, 0n);
  }

  /** keyUsage of several keys, in one pass over the account's ledger. */
  async keysUsage(accountId: string, keyIds: readonly string[]): Promise<Map<string, bigint>> {
    const usage = new Map(keyIds.map((keyId) => [keyId, 0n]));
    for (const e of this.ledger.get(accountId) ?? []) {
      const spent = e.type === 'charge' && e.keyId !== undefined ? usage.get(e.keyId) : undefined;
      if (spent !== undefined && e.keyId !== undefined) usage.set(e.keyId, spent - e.deltaNano);
    }
    return usage;
  }

  /** Top-ups minus corrections. */
  async totalCredits(accountId: string): Promise<bigint> {
    return (this.ledger.get(accountId) ?? [])
      .filter((e) => e.type === 'topup' || e.type === 'correction')
      .reduce((sum, e) => sum + e.deltaNano, 0n);
  }

  async listLedger(accountId: string): Promise<LedgerEntry[]> {
    return [...(this.ledger.get(accountId) ?? [])];
  }

  async getLedgerEntry(accountId: string, entryId: string): Promise<LedgerEntry | undefined> {
    return this.ledger.get(accountId)?.find((e) => e.entryId === entryId);
  }

  async listCreditHistory(accountId: string): Promise<LedgerEntry[]> {
    return (this.ledger.get(accountId) ?? [])
      .filter((e) => e.type === 'topup' || e.type === 'correction')
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt) || byBytes(b.entryId, a.entryId));
  }

  /** Summed from the ledger itself: what the DynamoDB adapter's counters must always equal. */
  async dailySpend(accountId: string, options: { today: string; days: number }): Promise<DaySpend[]> {
    const days = daysUpTo(options.today, options.days);
    const spend = new Map(days.map((day) => [day, {} as Record<string, bigint>]));
    for (const entry of this.ledger.get(accountId) ?? []) {
      const byTier = entry.type === 'charge' ? spend.get(utcDay(entry.createdAt)) : undefined;
      if (!byTier) continue;
      const tier = entry.tier ?? 'other';
      byTier[tier] = (byTier[tier] ?? 0n) - entry.deltaNano;
    }
    return days.map((day) => ({ day, byTier: spend.get(day) ?? {} }));
  }

  async listCharges(accountId: string, options: { limit: number; after?: string }): Promise<ChargePage> {
    const ofAccount = (this.ledger.get(accountId) ?? []).filter((e) => e.type === 'charge');
    const cursor = options.after === undefined ? undefined : cursorEntry(options.after, ofAccount);
    const all = ofAccount.filter((e) => cursor === undefined || newestFirst(cursor, e) < 0).sort(newestFirst);
    const charges = all.slice(0, options.limit);
    const last = charges.at(-1);
    return all.length > options.limit && last ? { charges, next: last.entryId } : { charges };
  }

  async putSession(session: DashboardSession): Promise<void> {
    this.calls.push('putSession');
    if (this.sessions.has(session.sessionHash)) throw new Error('session exists');
    this.sessions.set(session.sessionHash, { ...session });
  }

  async getSession(sessionHash: string, nowSeconds: number): Promise<DashboardSession | undefined> {
    const session = this.sessions.get(sessionHash);
    return session && session.expiresAt > nowSeconds ? { ...session } : undefined;
  }

  async deleteSession(sessionHash: string): Promise<void> {
    this.calls.push('deleteSession');
    this.sessions.delete(sessionHash);
    this.notices.delete(sessionHash);
  }

  readonly notices = new Map<string, SessionNotice>();

  async setSessionNotice(sessionHash: string, notice: SessionNotice): Promise<void> {
    if (this.sessions.has(sessionHash)) this.notices.set(sessionHash, structuredClone(notice));
  }

  async takeSessionNotice(sessionHash: string, nowSeconds: number): Promise<SessionNotice | undefined> {
    const notice = this.notices.get(sessionHash);
    this.notices.delete(sessionHash);
    return notice && notice.until > nowSeconds ? notice : undefined;
  }

  async accountOfUser(subject: string): Promise<string | undefined> {
    return this.users.get(subject);
  }

  async linkUser(subject: string, accountId: string): Promise<string> {
    this.calls.push('linkUser');
    const linked = this.users.get(subject);
    if (linked) return linked;
    this.users.set(subject, accountId);
    return accountId;
  }

  /** Each account's remembered Stripe Customer. */
  readonly billingCustomers = new Map<string, string>();

  async billingCustomerOf(accountId: string): Promise<string | undefined> {
    return this.billingCustomers.get(accountId);
  }

  async rememberBillingCustomer(
    accountId: string,
    customer: string,
    _now: string,
    options: { replacing?: string } = {},
  ): Promise<string> {
    this.calls.push('rememberBillingCustomer');
    const remembered = this.billingCustomers.get(accountId);
    if (remembered === undefined || (remembered === options.replacing && remembered !== customer))
      this.billingCustomers.set(accountId, customer);
    return this.billingCustomers.get(accountId) as string;
  }
}
