/**
 * The DynamoDB implementation of the store port (core/store.ts), by what each part owns: what the
 * request path uses (request-store.ts DynamoRequestStore: accounts, holds, the ledger's settlement),
 * which this class extends with the rest: keys (keys.ts), the ledger's top-ups and reads (ledger.ts),
 * credit moved between slices (transfers.ts), what only the operator does beside (corrections.ts:
 * credit taken back, accounts a page at a time), activity (activity.ts), the dashboard's items
 * (dashboard.ts), the team (team.ts), invitations (invitations.ts) and the audit log (audit.ts).
 * SDK exceptions become domain outcomes there (a failed condition is 'refused', 'already-settled',
 * AccountNotFoundError...); anything else is rethrown.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { AccountStatus } from '../../core/access.js';
import type {
  AccountPage,
  AccountRecord,
  ChargeEntry,
  ChargePage,
  CorrectionOutcome,
  DashboardSession,
  DaySpend,
  Hold,
  KeyRecord,
  LedgerEntry,
  SessionNotice,
  Store,
  Transfer,
  TransferOutcome,
} from '../../core/store.js';
import type { Audited } from '../../core/store-team.js';
import type { AuditEntry, AuditPage, AuditQuery, Invitation, Member, Role } from '../../core/team.js';
import { Activity } from './activity.js';
import { AuditLog } from './audit.js';
import type { WireConnection } from './connection.js';
import { Corrections } from './corrections.js';
import { DashboardItems } from './dashboard.js';
import { Invitations } from './invitations.js';
import { slicesOf, type TableNames } from './items.js';
import { Keys } from './keys.js';
import { DynamoRequestStore } from './request-store.js';
import { Team } from './team.js';
import type { DynamoTimeouts } from './timeouts.js';

export class DynamoStore extends DynamoRequestStore implements Store {
  private readonly keys: Keys;
  private readonly corrections: Corrections;
  private readonly dashboard: DashboardItems;
  private readonly activity: Activity;
  private readonly team: Team;
  private readonly invitations: Invitations;
  private readonly auditLog: AuditLog;

  constructor(
    client: DynamoDBClient,
    tables: TableNames,
    timeouts?: DynamoTimeouts,
    connection?: WireConnection | DynamoDBClient,
  ) {
    super(client, tables, timeouts, connection);
    this.keys = new Keys(this.db);
    this.corrections = new Corrections(this.db, this.accounts.slices, this.transfers);
    this.dashboard = new DashboardItems(this.db);
    this.activity = new Activity(this.db);
    this.team = new Team(this.db);
    this.invitations = new Invitations(this.db);
    this.auditLog = new AuditLog(this.db);
  }

  /** The generation ids among these that have a ledger entry (an eventually consistent read). */
  settledAmong(entries: readonly ChargeEntry[]): Promise<Set<string>> {
    return this.ledger.settledAmong(entries);
  }
  getAccount(accountId: string, options: { deadline?: number } = {}): Promise<AccountRecord | undefined> {
    return this.accounts.getAccount(accountId, options);
  }
  listAccountIds(): Promise<string[]> {
    return this.accounts.listAccountIds();
  }
  countNegativeBalances(): Promise<number> {
    return this.accounts.countNegativeBalances();
  }
  createAccount(accountId: string, initialCreditsNano: bigint, now: string): Promise<void> {
    return this.accounts.createAccount(accountId, initialCreditsNano, now);
  }
  async splitAccount(accountId: string, slices: number): Promise<number> {
    const had = slicesOf(await this.accounts.slices.head(accountId));
    const now = await this.accounts.slices.split(accountId, slices);
    // Split by this call (or one meanwhile): the credit is evened out over the new slices.
    if (now > had) await this.transfers.rebalance(accountId);
    return now;
  }
  setAccountStatus(
    accountId: string,
    status: AccountStatus,
    now: string,
    options: { cause?: string } = {},
  ): Promise<boolean> {
    return this.accounts.setAccountStatus(accountId, status, now, options);
  }
  createKey(key: KeyRecord, options?: { maxActive?: number } & Audited): Promise<void> {
    return this.keys.createKey(key, options);
  }
  findKeyById(keyId: string): Promise<KeyRecord | undefined> {
    return this.keys.findKeyById(keyId);
  }
  revokeKey(keyHash: string, now: string, options: Audited = {}): Promise<KeyRecord> {
    return this.keys.revokeKey(keyHash, now, options);
  }
  listKeys(accountId: string): Promise<KeyRecord[]> {
    return this.keys.listKeys(accountId);
  }
  getKey(keyHash: string): Promise<KeyRecord | undefined> {
    return this.keys.getKey(keyHash);
  }
  keyUsage(accountId: string, keyId: string): Promise<bigint> {
    return this.accounts.slices.keyUsage(accountId, keyId);
  }
  keysUsage(accountId: string, keyIds: readonly string[]): Promise<Map<string, bigint>> {
    return this.accounts.slices.keysUsage(accountId, keyIds);
  }
  setKeyDailyCap(
    accountId: string,
    keyId: string,
    capNano: bigint | undefined,
    options: Audited = {},
  ): Promise<KeyRecord> {
    return this.keys.setKeyDailyCap(accountId, keyId, capNano, options);
  }
  renameKey(accountId: string, keyId: string, name: string, audit: AuditEntry): Promise<void> {
    return this.keys.renameKey(accountId, keyId, name, audit);
  }
  keyDailySpend(accountId: string, keyId: string, day: string): Promise<bigint> {
    return this.accounts.slices.keyDailySpend(accountId, keyId, day);
  }

  keysDailySpend(accountId: string, keyIds: readonly string[], day: string): Promise<Map<string, bigint>> {
    return this.accounts.slices.keysDailySpend(accountId, keyIds, day);
  }

  topUp(
    accountId: string,
    reference: string,
    amountNano: bigint,
    now: string,
    options: Audited = {},
  ): Promise<boolean> {
    return this.ledger.topUp(accountId, reference, amountNano, now, options);
  }
  removeCredits(
    accountId: string,
    reference: string,
    amountNano: bigint,
    now: string,
    options: { force?: boolean } & Audited = {},
  ): Promise<CorrectionOutcome> {
    return this.corrections.remove(accountId, reference, amountNano, now, options);
  }
  listAccounts(options: { limit: number; after?: string }): Promise<AccountPage> {
    return this.corrections.listAccounts(options);
  }
  listLedger(accountId: string): Promise<LedgerEntry[]> {
    return this.ledger.listLedger(accountId);
  }
  getLedgerEntry(accountId: string, entryId: string): Promise<LedgerEntry | undefined> {
    return this.ledger.getLedgerEntry(accountId, entryId);
  }
  async totalCredits(accountId: string): Promise<bigint> {
    const [topUps, corrections] = await Promise.all([
      this.ledger.totalCredits(accountId),
      this.corrections.total(accountId),
    ]);
    return topUps - corrections;
  }

  listHolds(accountId?: string): Promise<Hold[]> {
    return this.holds.listHolds(accountId);
  }
  listTransfers(accountId?: string): Promise<Transfer[]> {
    return this.transfers.listTransfers(accountId);
  }
  completeTransfer(transfer: Transfer, now: number): Promise<TransferOutcome> {
    return this.transfers.completeTransfer(transfer, now);
  }

  listCreditHistory(accountId: string): Promise<LedgerEntry[]> {
    return this.dashboard.listCreditHistory(accountId);
  }
  dailySpend(accountId: string, options: { today: string; days: number }): Promise<DaySpend[]> {
    return this.activity.dailySpend(accountId, options);
  }
  listCharges(accountId: string, options: { limit: number; after?: string }): Promise<ChargePage> {
    return this.activity.listCharges(accountId, options);
  }
  /** Sweeper: moves past days' counters off the slice items into day items (activity.ts). */
  rollUpActivity(today: string): Promise<number> {
    return this.activity.rollUp(today);
  }
  putSession(session: DashboardSession): Promise<void> {
    return this.dashboard.putSession(session);
  }
  getSession(sessionHash: string, nowSeconds: number): Promise<DashboardSession | undefined> {
    return this.dashboard.getSession(sessionHash, nowSeconds);
  }
  deleteSession(sessionHash: string): Promise<void> {
    return this.dashboard.deleteSession(sessionHash);
  }
  setSessionNotice(sessionHash: string, notice: SessionNotice): Promise<void> {
    return this.dashboard.setSessionNotice(sessionHash, notice);
  }
  takeSessionNotice(sessionHash: string, nowSeconds: number): Promise<SessionNotice | undefined> {
    return this.dashboard.takeSessionNotice(sessionHash, nowSeconds);
  }
  accountOfUser(subject: string): Promise<string | undefined> {
    return this.dashboard.accountOfUser(subject);
  }
  linkUser(subject: string, accountId: string, now: string): Promise<string> {
    return this.dashboard.linkUser(subject, accountId, now);
  }
  billingCustomerOf(accountId: string): Promise<string | undefined> {
    return this.dashboard.billingCustomerOf(accountId);
  }
  rememberBillingCustomer(
    accountId: string,
    customer: string,
    now: string,
    options?: { replacing?: string },
  ): Promise<string> {
    return this.dashboard.rememberBillingCustomer(accountId, customer, now, options);
  }

  addFirstOwner(member: Member, audit: AuditEntry): Promise<boolean> {
    return this.team.addFirstOwner(member, audit);
  }
  getMember(accountId: string, subject: string): Promise<Member | undefined> {
    return this.team.getMember(accountId, subject);
  }
  listMembers(accountId: string): Promise<Member[]> {
    return this.team.listMembers(accountId);
  }
  membershipsOf(subject: string): Promise<Member[]> {
    return this.team.membershipsOf(subject);
  }
  changeRole(accountId: string, subject: string, from: Role, to: Role, audit: AuditEntry): Promise<Member> {
    return this.team.changeRole(accountId, subject, from, to, audit);
  }
  removeMember(accountId: string, subject: string, audit: AuditEntry): Promise<void> {
    return this.team.removeMember(accountId, subject, audit);
  }
  transferOwnership(
    accountId: string,
    from: string,
    to: string,
    fromBecomes: Role,
    audit: AuditEntry,
  ): Promise<void> {
    return this.team.transferOwnership(accountId, from, to, fromBecomes, audit);
  }
  createInvitation(invitation: Invitation, audit: AuditEntry): Promise<void> {
    return this.invitations.createInvitation(invitation, audit);
  }
  listInvitations(accountId: string, nowSeconds: number): Promise<Invitation[]> {
    return this.invitations.listInvitations(accountId, nowSeconds);
  }
  getInvitation(accountId: string, invitationId: string): Promise<Invitation | undefined> {
    return this.invitations.getInvitation(accountId, invitationId);
  }
  revokeInvitation(accountId: string, invitationId: string, audit: AuditEntry): Promise<void> {
    return this.invitations.revokeInvitation(accountId, invitationId, audit);
  }
  acceptInvitation(
    accountId: string,
    invitationId: string,
    tokenHash: string,
    person: { subject: string; email: string },
    now: string,
    audit: AuditEntry,
  ): Promise<Member> {
    return this.invitations.acceptInvitation(accountId, invitationId, tokenHash, person, now, audit);
  }
  appendAudit(entry: AuditEntry): Promise<void> {
    return this.auditLog.appendAudit(entry);
  }
  listAudit(accountId: string, query: AuditQuery): Promise<AuditPage> {
    return this.auditLog.listAudit(accountId, query);
  }
}
