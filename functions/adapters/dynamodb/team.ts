/** The members of an account in DynamoDB (schema.ts TEAM_TABLE): implemented next. */
import type { AuditEntry, Member, Role } from '../../core/team.js';
import { StorePart } from './store-db.js';

const notYet = (): never => {
  throw new Error('not implemented');
};

export class Team extends StorePart {
  async addFirstOwner(_member: Member, _audit: AuditEntry): Promise<boolean> {
    return notYet();
  }
  async getMember(_accountId: string, _subject: string): Promise<Member | undefined> {
    return notYet();
  }
  async listMembers(_accountId: string): Promise<Member[]> {
    return notYet();
  }
  async membershipsOf(_subject: string): Promise<Member[]> {
    return notYet();
  }
  async changeRole(_a: string, _s: string, _from: Role, _to: Role, _audit: AuditEntry): Promise<Member> {
    return notYet();
  }
  async removeMember(_accountId: string, _subject: string, _audit: AuditEntry): Promise<void> {
    return notYet();
  }
  async transferOwnership(_a: string, _f: string, _t: string, _r: Role, _audit: AuditEntry): Promise<void> {
    return notYet();
  }
}
