/**
 * The store port: everything the request path, the hold sweeper and the operator need from the
 * database, in domain terms. One adapter implements it (functions/adapters/dynamodb/, the only place
 * that knows table names and item formats); tests use an in-memory implementation
 * (test/support/memory-store.ts). Money is integer nano-USD throughout. The ledger's entries and
 * their order, days and ids are in store-ledger.ts; the dashboard's items (sessions, user links, the
 * account's Stripe Customer) in store-dashboard.ts; the team's and the audit log's in store-team.ts.
 */
import type { AccountStatus, KeyStatus, Principal } from './access.js';
import type { DashboardStore } from './store-dashboard.js';
import type { ChargePage, DaySpend, LedgerEntry } from './store-ledger.js';
import type { Audited, TeamStore } from './store-team.js';

export type { DashboardSession, SessionNotice } from './session.js';
/** The ledger's part of the port, kept importable from here as before. */
export type { ChargePage, DaySpend, LedgerEntry } from './store-ledger.js';
export {
  correctionEntryId,
  cursorEntry,
  newestFirst,
  secondOfId,
  topUpEntryId,
  utcDay,
} from './store-ledger.js';

/** One charge: the ledger entry keyed by its generation id, and the deduction it stands for. */
export interface ChargeEntry {
  accountId: string;
  generationId: string;
  keyId: string;
  tier: string;
  upstreamModel: string;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  /** Upstream cost as an exact USD decimal string. */
  upstreamCostUsd: string;
  billedNano: bigint;
  /** The token counts were estimated by the gateway (the upstream reported none, or none usable). */
  estimated: boolean;
  /** Why the billed usage differs from the upstream's report (usage-bounds.ts); absent when it does not. */
  usageAdjusted?: string;
  /** The request's `user` field (at most 256 characters), for splitting a bill by end user. */
  user?: string;
  /** How the generation ended, as the client saw it (`stop`, `length`, `tool_calls`, `error`...). */
  finishReason?: string;
  createdAt: string;
  /** The balance slice its cost is deducted from (the one its request was admitted on); absent: 0. */
  slice?: number;
}

/**
 * A hold: the worst-case billed cost of one admitted request, set aside from the account's available
 * credit (balance minus everything held) until the request settles or the hold expires.
 */
export interface Hold {
  accountId: string;
  /** The generation id of the request it holds for. */
  holdId: string;
  amountNano: bigint;
  /** Epoch ms after which the sweeper may release it (the function's timeout plus a margin). */
  expiresAt: number;
  /** The balance slice it holds on (the generation's); absent: 0, the account item. */
  slice?: number;
  createdAt: string;
  /** A capped key's hold (KeyRecord.dailyCapNano): its amount is on that key's counter of createdAt's day too. */
  keyId?: string;
  /**
   * The generation's usage record (JSON text, as its `generation usage` log line carries it), written
   * on a held request's hold before its settlement, and on a deferred settlement's item: the sweeper
   * settles the generation from it (once: the ledger entry is keyed by the generation id).
   */
  usageRecord?: string;
  /**
   * The function gave up on this generation's settlement and left it here for the sweeper, which
   * completes it at its next run (without waiting for the expiry). A deferred settlement of a request
   * that had no hold is an item of amount 0.
   */
  deferred?: boolean;
}

/**
 * How long credit moved between two slices of an account waits on its source before it moves: the
 * completions function's timeout (300 s) and the hold expiry margin (60 s). A request admitted
 * without a hold (the fast path) was admitted on the credit its slice had then, and bills that slice
 * when it ends, up to the function's timeout later. Credit moved away at once would be spent twice:
 * by those requests on the source and by new ones on the destination (an account 4.1 requests' worst
 * case, four requests in flight, split into 2: 2.8 bills below zero where the bound is 2). So a
 * transfer is scheduled: the amount is marked on the source (`outgoingNano`), where no new request is
 * admitted on the fast path against it (a held request may still use it: its hold is counted), and
 * after this delay, when every request admitted before the mark has ended and billed, the sweeper
 * moves what the source still has of it. A test (test/infra/function-settings.test.ts) keeps it at
 * least the completions timeout plus the margin.
 */
export const TRANSFER_DELAY_MS = 360_000;

/**
 * Credit on its way from one slice of an account to another (TRANSFER_DELAY_MS): marked on the source
 * as outgoing, moved by the sweeper once due, as much of it as the source still has available then.
 */
export interface Transfer {
  accountId: string;
  transferId: string;
  from: number;
  to: number;
  amountNano: bigint;
  /** Epoch ms from which the sweeper moves it. */
  dueAt: number;
  createdAt: string;
}

/** What moving a due transfer came to: the amount moved (0n: the source had spent it), or not due / gone. */
export type TransferOutcome = { moved: bigint } | 'not-due' | 'gone';

/** What one settlement met on its way: counted by the caller for the contention metrics. */
export interface Contention {
  /** Attempts cancelled because another transaction held an item (TransactionConflict). */
  conflicts: number;
  /** Attempts sent again (after a conflict, throttling or a lost answer). */
  retries: number;
}

export interface AccountRecord {
  accountId: string;
  status: AccountStatus;
  balanceNano: bigint;
  /** The sum of the account's live holds. */
  heldNano: bigint;
  /** Credit marked on its slices to move to others (Transfer); absent: none. */
  outgoingNano?: bigint;
  createdAt?: string;
  /** How many slices its balance is split into (1: the account item alone). */
  slices: number;
}

export interface KeyRecord {
  keyHash: string;
  keyId: string;
  accountId: string;
  name: string;
  displayPrefix: string;
  status: KeyStatus;
  createdAt: string;
  revokedAt?: string;
  /**
   * The key's daily spend cap (nano-USD, > 0); absent: none. Its requests are refused (402, before the
   * upstream) once its day counters (`kc_<YYYYMMDD>_<keyId>` on the slice items the settlement writes
   * anyway: its charges and its live holds) reach the slice's share of it, until 00:00 UTC. Bound: a
   * key's spend in a UTC day is at most cap + n slices x one request's worst case (billing/key-cap.ts).
   */
  dailyCapNano?: bigint;
  createdBy?: { subject: string; email?: string }; // who made it on the dashboard; absent: the operator
}

/**
 * What a settlement came to: 'settled' when this call's own write created the ledger entry (a
 * commit whose answer was lost, sent again by the same call, included), 'already-settled' when
 * another writer's did (the function, the sweeper, the logged-usage function, an earlier call).
 * Either way the generation is charged once; 'settled' is what a caller may count as billed.
 */
export type SettleOutcome = 'settled' | 'already-settled';

/**
 * What placing a hold came to: held, refused for credit (all of it held or spent) or for the key's
 * daily cap ('capped'), or because the account is no longer active (suspended or banned since: 403).
 */
export type HoldOutcome = 'held' | 'refused' | 'capped' | Exclude<AccountStatus, 'active'>;

/**
 * What taking credit back came to: applied, already applied (the reference has its entry: nothing
 * written), or refused (it would take the account's available credit below zero: nothing written).
 */
export type CorrectionOutcome = 'applied' | 'already-applied' | 'refused';

/** One page of accounts (Store.listAccounts), and where the next one starts when there may be more. */
export interface AccountPage {
  accounts: AccountRecord[];
  next?: string;
}

export interface Store extends TeamStore, DashboardStore {
  /** The key and its account, read strongly consistently (revocation, status and balance are fresh). */
  loadPrincipal(keyHash: string): Promise<Principal | undefined>;
  /**
   * Places a hold in one conditional write: only if the account is active and its available credit
   * (balance minus held) is above zero before this hold, and, for a capped key's (`keyId`), its day
   * counter below `capShareNano`. Refused otherwise, saying why: the account's status when it is not
   * active, 'refused' (credit), else 'capped'. Gives up by `deadline`.
   */
  placeHold(hold: Hold, options?: { deadline?: number; capShareNano?: bigint }): Promise<HoldOutcome>;
  /**
   * Writes the ledger entry and deducts its cost in ONE transaction, releasing `hold` in the same
   * transaction when given (and still live). Idempotent by generation id. Gives up by `deadline`.
   */
  settleCharge(
    entry: ChargeEntry,
    options?: { hold?: Hold; deadline?: number; contention?: Contention },
  ): Promise<SettleOutcome>;
  /**
   * Leaves a settlement that could not be written in time where the sweeper completes it: the usage
   * record on the generation's hold item (created, of amount 0, if there is none), marked deferred;
   * written only while the generation has no ledger entry ('already-settled' if it has: a settlement
   * that committed though its answer was lost). Gives up by `deadline`.
   */
  deferSettlement(
    entry: ChargeEntry,
    usageRecord: string,
    options?: { hold?: Hold; deadline?: number },
  ): Promise<'deferred' | 'already-settled'>;
  /**
   * Releases a hold without a charge (sweeper, or a request that failed before spending). True if it
   * was live. Gives up by `deadline`.
   */
  releaseHold(hold: Hold, options?: { onlyIfExpiredAt?: number; deadline?: number }): Promise<boolean>;
  /** Keeps a generation's usage record on its hold, if the hold is still there. True if it was. */
  recordUsageOnHold(hold: Hold, usageRecord: string): Promise<boolean>;
  /** The account's live holds (or every account's), soonest expiry first; transfers are not holds. */
  listHolds(accountId?: string): Promise<Hold[]>;
  /** The transfers between slices still to move (of one account, or of all), soonest due first. */
  listTransfers(accountId?: string): Promise<Transfer[]>;
  /**
   * Moves a due transfer (dueAt <= now): what the source still has available of it (its balance
   * minus what it holds and its other outgoing credit; at most the amount, at least 0) from the
   * source to the destination, the marks cleared and the transfer item deleted, in one transaction.
   */
  completeTransfer(transfer: Transfer, now: number): Promise<TransferOutcome>;
  /**
   * The account's balance over all its slices, read strongly consistently (each slice as of its own
   * read), for a refusal to state; undefined if the account is gone.
   */
  accountBalance(accountId: string): Promise<bigint | undefined>;

  /**
   * The account, its balance and held amount summed over its slices as of one instant: a transfer
   * between two slices (a top-up spread, a rebalance) is in the total whole or not at all, never
   * half. What a total is shown or reconciled from (GET /api/v1/credits, `admin reconcile`). Gives
   * up by `deadline` when the items stay busy.
   */
  getAccount(accountId: string, options?: { deadline?: number }): Promise<AccountRecord | undefined>;
  listAccountIds(): Promise<string[]>;
  /** Accounts whose creditBalance is below zero (a scan: for a scheduled check, not a request). */
  countNegativeBalances(): Promise<number>;
  /** Creates an active account, with its initial credits as a top-up entry. Throws AccountExistsError. */
  createAccount(accountId: string, initialCreditsNano: bigint, now: string): Promise<void>;
  /**
   * Splits the account's balance into `slices` slices (never fewer than it has): the new ones are
   * created empty, in one transaction that checks the account item did not change since it was read,
   * and transfers are scheduled to even the available credit out (Transfer: it moves after
   * TRANSFER_DELAY_MS). Returns the slice count now. Throws AccountNotFoundError.
   */
  splitAccount(accountId: string, slices: number): Promise<number>;
  /**
   * Throws AccountNotFoundError. With a `cause` (a dispute's reference) the change is made once per
   * cause and only on an active account, one conditional write: false when the account is not active
   * (a ban stays) or the cause was applied before (an operator's reinstatement since then stands).
   */
  setAccountStatus(
    accountId: string,
    status: AccountStatus,
    now: string,
    options?: { cause?: string },
  ): Promise<boolean>;
  /**
   * Adds credits once per reference (on slice 0, with its ledger entry; a split account's share of the
   * other slices moves to them by Transfer); false when it was applied already. AccountNotFoundError.
   */
  topUp(
    accountId: string,
    reference: string,
    amountNano: bigint,
    now: string,
    options?: Audited,
  ): Promise<boolean>;
  /**
   * Takes credit back (a refund by hand, a correction) once per reference: the ledger entry
   * `correction#<reference>` and the deduction in one transaction, as a top-up adds; on a split
   * account the deduction is taken from the slices that have it, slice 0 first, in that same
   * transaction. Unless `force`, only while the account's available credit (balance minus held,
   * over all its slices) covers the amount: 'refused' otherwise. Forced, what no slice has is taken
   * from slice 0, below zero. Operator only. Throws AccountNotFoundError.
   */
  removeCredits(
    accountId: string,
    reference: string,
    amountNano: bigint,
    now: string,
    options?: { force?: boolean } & Audited,
  ): Promise<CorrectionOutcome>;
  /**
   * At most `limit` accounts, in the table's own order (not sorted), after `after` (a previous page's
   * `next`); `next` is set while there may be more. Operator only (a Scan). Each record is its account
   * item's: a split account's balance and held amount there are slice 0's alone (getAccount sums them).
   */
  listAccounts(options: { limit: number; after?: string }): Promise<AccountPage>;

  /**
   * Stores a new active key and counts it on its account (the account's count of active keys, made
   * from its keys the first time one is needed): one write. With `maxActive`, refused
   * (TooManyKeysError) when the account has that many active keys already, a condition of that same
   * write, so that keys created at once never pass the bound. Throws AccountNotFoundError.
   */
  createKey(key: KeyRecord, options?: { maxActive?: number } & Audited): Promise<void>;
  findKeyById(keyId: string): Promise<KeyRecord | undefined>;
  /**
   * Marks the key revoked (keeping the first revocation time) and returns it; an active key leaves its
   * account's count of active keys in the same write.
   */
  revokeKey(keyHash: string, now: string, options?: Audited): Promise<KeyRecord>;
  listKeys(accountId: string): Promise<KeyRecord[]>;
  /** Sets (nano-USD > 0) or removes a key's daily cap: one write of a key of `accountId` (else KeyNotFoundError). */
  setKeyDailyCap(
    accountId: string,
    keyId: string,
    cap: bigint | undefined,
    options?: Audited,
  ): Promise<KeyRecord>;
  /** What the key committed on UTC day `day`: its day counters over the slices, read strongly consistently. */
  keyDailySpend(accountId: string, keyId: string, day: string): Promise<bigint>;
  /** keyDailySpend of each of `keyIds` (0 for one not of the account), read in one pass over the slices. */
  keysDailySpend(accountId: string, keyIds: readonly string[], day: string): Promise<Map<string, bigint>>;

  /** The key by its hash, read strongly consistently. */
  getKey(keyHash: string): Promise<KeyRecord | undefined>;
  /**
   * What the key has spent (nano-USD): the running total its settlements add up on the slices they
   * deduct from, summed over the account's slices, read strongly consistently (no transaction writes
   * it on two slices, so a sum of items each read on its own never sees one half). It counts the
   * charges settled since per-key totals were kept (the ledger has every charge's key: `admin usage
   * --by key`).
   */
  keyUsage(accountId: string, keyId: string): Promise<bigint>;
  /**
   * keyUsage of several keys of one account, by key id, in one pass over the slices: the same reads
   * as for one key, however many keys (the Activity page's per-key totals).
   */
  keysUsage(accountId: string, keyIds: readonly string[]): Promise<Map<string, bigint>>;

  listLedger(accountId: string): Promise<LedgerEntry[]>;
  getLedgerEntry(accountId: string, entryId: string): Promise<LedgerEntry | undefined>;
  /**
   * Every credit the account was ever given and kept (nano-USD): the sum of its top-up entries,
   * initial credits included, minus its corrections (credit taken back). The ledger's invariant
   * (`admin reconcile`) is balance = top-ups - corrections - charges, so what it has spent is this
   * minus its balance.
   */
  totalCredits(accountId: string): Promise<bigint>;
  /**
   * The account's top-ups and corrections (credit taken back), newest first, without its charges
   * (the dashboard's billing history: two queries by entry id prefix, however many charges it has).
   */
  listCreditHistory(accountId: string): Promise<LedgerEntry[]>;
  /**
   * Spend per UTC day (utcDay of each charge's createdAt) by tier, for the `days` days up to `today`
   * (`YYYY-MM-DD`), oldest first, every day listed; exact: every charge counted once, over all slices.
   */
  dailySpend(accountId: string, options: { today: string; days: number }): Promise<DaySpend[]>;
  /**
   * The account's charges, newest first (newestFirst: their createdAt, then id), `limit` a page, after
   * `after` (a previous page's `next`: the id of the charge it ended on).
   */
  listCharges(accountId: string, options: { limit: number; after?: string }): Promise<ChargePage>;
}

/**
 * Slices: one account's balance may be split into up to MAX_SLICES items, so that its requests do not
 * all meet on one item (DynamoDB cancels one of two transactions on an item at once, and serves one
 * item at most 1,000 write units a second). Slice 0 is the account item itself (an account never
 * split is one slice, as every account was before slices); slice i is its own item. Each slice has
 * its own balance and held amount and a copy of the account's status; a request is admitted on one
 * slice, named in its generation id, and its hold and charge go to that slice only. The account's
 * balance is the sum of its slices.
 */
export const MAX_SLICES = 62;

/**
 * The store's refusals that are not HTTP answers (an unknown or existing account, a key not of the
 * account, one key too many).
 */
export { AccountExistsError, AccountNotFoundError, KeyNotFoundError, TooManyKeysError } from './errors.js';

/** The `slice` field of a hold or charge of a request admitted on `principal`'s slice (none for 0). */
export const sliceOf = (principal: { slice?: number }): { slice?: number } =>
  principal.slice ? { slice: principal.slice } : {};
