/**
 * The in-memory store's part for the people of an account and the audit log (core/store-team.ts),
 * which MemoryStore extends. Each change checks everything it is conditioned on and then writes, with
 * no await between: as the DynamoDB adapter's transaction, it is written whole (with its entry) or not
 * at all.
 */
import { InvitationError, MemberChangeError, type TeamStore } from '../../functions/core/store-team.js';
import type {
  AuditEntry,
  AuditPage,
  AuditQuery,
  Invitation,
  Member,
  Role,
} from '../../functions/core/team.js';

const memberAt = (accountId: string, subject: string) => `${accountId}|${subject}`;
const inviteAt = (accountId: string, invitationId: string) => `${accountId}|${invitationId}`;

export abstract class MemoryTeam implements Omit<TeamStore, 'renameKey'> {
  readonly members = new Map<string, Member>();
  readonly invitations = new Map<string, Invitation>();
  /** Every entry, by account, in the order written. */
  readonly audit = new Map<string, AuditEntry[]>();

  /** Appends an entry (a duplicate id is refused, as the adapter's conditional Put). */
  protected record(entry: AuditEntry | undefined): void {
    if (!entry) return;
    const entries = this.audit.get(entry.accountId) ?? [];
    if (entries.some((e) => e.entryId === entry.entryId))
      throw new Error(`audit entry ${entry.entryId} exists`);
    const kept = structuredClone(entry);
    if (kept.userAgent !== undefined) kept.userAgent = kept.userAgent.slice(0, 256);
    entries.push(kept);
    this.audit.set(entry.accountId, entries);
  }

  /** The entry could be written (checked before the change it goes with, so that neither is written alone). */
  protected checkEntry(entry: AuditEntry | undefined): void {
    if (entry && this.audit.get(entry.accountId)?.some((e) => e.entryId === entry.entryId))
      throw new Error(`audit entry ${entry.entryId} exists`);
  }

  private ownersOf(accountId: string): number {
    return [...this.members.values()].filter((m) => m.accountId === accountId && m.role === 'owner').length;
  }

  async addFirstOwner(member: Member, audit: AuditEntry): Promise<boolean> {
    if ([...this.members.values()].some((m) => m.accountId === member.accountId)) return false;
    this.checkEntry(audit);
    this.members.set(memberAt(member.accountId, member.subject), { ...member, role: 'owner' });
    this.record(audit);
    return true;
  }

  async getMember(accountId: string, subject: string): Promise<Member | undefined> {
    const member = this.members.get(memberAt(accountId, subject));
    return member ? { ...member } : undefined;
  }

  async listMembers(accountId: string): Promise<Member[]> {
    return [...this.members.values()]
      .filter((m) => m.accountId === accountId)
      .sort((a, b) => a.joinedAt.localeCompare(b.joinedAt) || a.subject.localeCompare(b.subject))
      .map((m) => ({ ...m }));
  }

  async membershipsOf(subject: string): Promise<Member[]> {
    return [...this.members.values()]
      .filter((m) => m.subject === subject)
      .sort((a, b) => a.joinedAt.localeCompare(b.joinedAt) || a.accountId.localeCompare(b.accountId))
      .map((m) => ({ ...m }));
  }

  async changeRole(
    accountId: string,
    subject: string,
    from: Role,
    to: Role,
    audit: AuditEntry,
  ): Promise<Member> {
    const member = this.members.get(memberAt(accountId, subject));
    if (!member) throw new MemberChangeError('not-found');
    if (member.role !== from) throw new MemberChangeError('changed');
    if (from === 'owner' && to !== 'owner' && this.ownersOf(accountId) <= 1)
      throw new MemberChangeError('last-owner');
    this.checkEntry(audit);
    member.role = to;
    this.record(audit);
    return { ...member };
  }

  async removeMember(accountId: string, subject: string, audit: AuditEntry): Promise<void> {
    const member = this.members.get(memberAt(accountId, subject));
    if (!member) throw new MemberChangeError('not-found');
    if (member.role === 'owner' && this.ownersOf(accountId) <= 1) throw new MemberChangeError('last-owner');
    this.checkEntry(audit);
    this.members.delete(memberAt(accountId, subject));
    this.record(audit);
  }

  async transferOwnership(
    accountId: string,
    from: string,
    to: string,
    fromBecomes: Role,
    audit: AuditEntry,
  ): Promise<void> {
    const giver = this.members.get(memberAt(accountId, from));
    const taker = this.members.get(memberAt(accountId, to));
    if (!giver || !taker || from === to) throw new MemberChangeError('not-found');
    if (giver.role !== 'owner') throw new MemberChangeError('changed');
    this.checkEntry(audit);
    taker.role = 'owner';
    giver.role = fromBecomes;
    this.record(audit);
  }

  async createInvitation(invitation: Invitation, audit: AuditEntry): Promise<void> {
    const at = inviteAt(invitation.accountId, invitation.invitationId);
    if (this.invitations.has(at)) throw new Error(`invitation ${invitation.invitationId} exists`);
    this.checkEntry(audit);
    this.invitations.set(at, { ...invitation, email: invitation.email.toLowerCase() });
    this.record(audit);
  }

  async listInvitations(accountId: string, nowSeconds: number): Promise<Invitation[]> {
    return [...this.invitations.values()]
      .filter((i) => i.accountId === accountId && i.expiresAt > nowSeconds)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.invitationId.localeCompare(b.invitationId))
      .map((i) => ({ ...i }));
  }

  async getInvitation(accountId: string, invitationId: string): Promise<Invitation | undefined> {
    const invitation = this.invitations.get(inviteAt(accountId, invitationId));
    return invitation ? { ...invitation } : undefined;
  }

  async revokeInvitation(accountId: string, invitationId: string, audit: AuditEntry): Promise<void> {
    const at = inviteAt(accountId, invitationId);
    if (!this.invitations.has(at)) throw new MemberChangeError('not-found');
    this.checkEntry(audit);
    this.invitations.delete(at);
    this.record(audit);
  }

  async acceptInvitation(
    accountId: string,
    invitationId: string,
    tokenHash: string,
    person: { subject: string; email: string },
    now: string,
    audit: AuditEntry,
  ): Promise<Member> {
    const at = inviteAt(accountId, invitationId);
    const invitation = this.invitations.get(at);
    if (!invitation || invitation.tokenHash !== tokenHash) throw new InvitationError('unknown');
    if (invitation.expiresAt <= Math.floor(Date.parse(now) / 1000)) throw new InvitationError('expired');
    if (invitation.email !== person.email.toLowerCase()) throw new InvitationError('wrong-email');
    if (this.members.has(memberAt(accountId, person.subject))) throw new InvitationError('already-member');
    this.checkEntry(audit);
    const member: Member = {
      accountId,
      subject: person.subject,
      email: person.email,
      role: invitation.role,
      joinedAt: now,
      invitedBy: invitation.invitedBy,
    };
    this.invitations.delete(at);
    this.members.set(memberAt(accountId, person.subject), member);
    this.record(audit);
    return { ...member };
  }

  async appendAudit(entry: AuditEntry): Promise<void> {
    this.record(entry);
  }

  async listAudit(accountId: string, query: AuditQuery): Promise<AuditPage> {
    const all = [...(this.audit.get(accountId) ?? [])]
      .filter(
        (e) =>
          (query.after === undefined || e.entryId < query.after) &&
          (query.since === undefined || e.entryId >= query.since) &&
          (query.until === undefined || e.entryId < query.until) &&
          (query.actions === undefined || query.actions.includes(e.action)) &&
          (query.actorSubject === undefined || e.actor.subject === query.actorSubject),
      )
      .sort((a, b) => (a.entryId < b.entryId ? 1 : a.entryId > b.entryId ? -1 : 0));
    const entries = all.slice(0, query.limit).map((e) => structuredClone(e));
    const last = entries.at(-1);
    return all.length > query.limit && last ? { entries, next: last.entryId } : { entries };
  }
}
