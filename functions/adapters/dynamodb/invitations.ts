/** Invitations in DynamoDB (schema.ts TEAM_TABLE): implemented next. */
import type { AuditEntry, Invitation, Member } from '../../core/team.js';
import { StorePart } from './store-db.js';

const notYet = (): never => {
  throw new Error('not implemented');
};

export class Invitations extends StorePart {
  async createInvitation(_invitation: Invitation, _audit: AuditEntry): Promise<void> {
    return notYet();
  }
  async listInvitations(_accountId: string, _nowSeconds: number): Promise<Invitation[]> {
    return notYet();
  }
  async getInvitation(_accountId: string, _invitationId: string): Promise<Invitation | undefined> {
    return notYet();
  }
  async revokeInvitation(_accountId: string, _invitationId: string, _audit: AuditEntry): Promise<void> {
    return notYet();
  }
  async acceptInvitation(
    _accountId: string,
    _invitationId: string,
    _tokenHash: string,
    _person: { subject: string; email: string },
    _now: string,
    _audit: AuditEntry,
  ): Promise<Member> {
    return notYet();
  }
}
