/**
 * The store port's part for the people of an account and the audit log (team.ts has the domain).
 * Every change to members or invitations writes its audit entry in the same transaction; the
 * account's count of owners is a condition of every write that could take it to zero, so two admins
 * racing never leave an account without an owner and never lose an update.
 */
import type { AuditEntry, AuditPage, AuditQuery, Invitation, Member, Role } from './team.js';

/**
 * The audit entry of a change made by one of the Store's own writes (a key created, revoked or
 * capped, credit added or taken back), written in that write's transaction: with it, the change and
 * its entry are both written or neither. Optional for the writes that came before the log.
 */
export interface Audited {
  audit?: AuditEntry;
}

/** Why a change to members was refused (nothing written); the dashboard shows it as a 400/403/404/409. */
export type MemberRefusal =
  /** It would leave the account without an owner. */
  | 'last-owner'
  /** The member (or invitation) is not there, or is another account's. */
  | 'not-found'
  /** The member's role is not the one the change was made against (someone changed it meanwhile). */
  | 'changed'
  /** The person is a member already. */
  | 'already-member';

export class MemberChangeError extends Error {
  constructor(readonly refusal: MemberRefusal) {
    super(`member change refused: ${refusal}`);
    this.name = 'MemberChangeError';
  }
}

/** Why an invitation cannot be accepted. */
export type InvitationRefusal = 'unknown' | 'expired' | 'used' | 'wrong-email' | 'already-member';

export class InvitationError extends Error {
  constructor(readonly refusal: InvitationRefusal) {
    super(`invitation refused: ${refusal}`);
    this.name = 'InvitationError';
  }
}

export interface TeamStore {
  /**
   * The first member of a new account, its owner (a first sign-in), with its entry: conditional on
   * the account having no member yet. Returns false (nothing written) when it has one.
   */
  addFirstOwner(member: Member, audit: AuditEntry): Promise<boolean>;
  /** The member, read strongly consistently (every dashboard request: a removed member is out at once). */
  getMember(accountId: string, subject: string): Promise<Member | undefined>;
  listMembers(accountId: string): Promise<Member[]>;
  /** Every account the person belongs to (the account switcher), oldest membership first. */
  membershipsOf(subject: string): Promise<Member[]>;
  /**
   * Changes a member's role from `from` to `to` (refused with 'changed' if it is not `from` any more),
   * with its entry; demoting an owner is refused with 'last-owner' if they are the only one.
   */
  changeRole(accountId: string, subject: string, from: Role, to: Role, audit: AuditEntry): Promise<Member>;
  /** Removes a member (or a member leaves), with its entry; the last owner is refused ('last-owner'). */
  removeMember(accountId: string, subject: string, audit: AuditEntry): Promise<void>;
  /**
   * Makes `to` (a member) an owner and `from` (an owner) the role `fromBecomes`, in one transaction
   * with its entry.
   */
  transferOwnership(
    accountId: string,
    from: string,
    to: string,
    fromBecomes: Role,
    audit: AuditEntry,
  ): Promise<void>;

  createInvitation(invitation: Invitation, audit: AuditEntry): Promise<void>;
  listInvitations(accountId: string, nowSeconds: number): Promise<Invitation[]>;
  getInvitation(accountId: string, invitationId: string): Promise<Invitation | undefined>;
  /** Deletes a pending invitation, with its entry ('not-found' if already used or gone). */
  revokeInvitation(accountId: string, invitationId: string, audit: AuditEntry): Promise<void>;
  /**
   * Accepts an invitation: its token's hash must match, it must not be expired or used, and the
   * accepting person's e-mail must be the invited one (case-insensitive). One transaction deletes the
   * invitation, adds the member and writes the entry: two accepts at once make one member.
   * Throws InvitationError.
   */
  acceptInvitation(
    accountId: string,
    invitationId: string,
    tokenHash: string,
    person: { subject: string; email: string },
    now: string,
    audit: AuditEntry,
  ): Promise<Member>;

  /**
   * Renames a key of `accountId` (a name keyNameProblem accepts, else RangeError), with its entry, in
   * one transaction; KeyNotFoundError for a key not of the account.
   */
  renameKey(accountId: string, keyId: string, name: string, audit: AuditEntry): Promise<void>;

  /** Appends an entry on its own, for a change whose write is not the store's (rare: say why at the call). */
  appendAudit(entry: AuditEntry): Promise<void>;
  /** The account's audit log, newest first, filtered. */
  listAudit(accountId: string, query: AuditQuery): Promise<AuditPage>;
}
