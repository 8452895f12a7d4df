import { describe, expect, it } from 'vitest';
import {
  AUDIT_RETENTION_DAYS,
  auditEntry,
  auditExpiry,
  can,
  isRole,
  type Permission,
  ROLES,
} from '../../../functions/core/team.js';

/** The team's domain (functions/core/team.ts): what each role may do, and an audit entry's id and expiry. */
describe('roles', () => {
  const permissions: Permission[] = ['read', 'keys', 'billing', 'members', 'owners'];
  const grants = (role: (typeof ROLES)[number]) => permissions.filter((p) => can(role, p));

  it('grant each role its permissions, only an owner all of them, every role read', () => {
    expect(Object.fromEntries(ROLES.map((role) => [role, grants(role)]))).toEqual({
      owner: ['read', 'keys', 'billing', 'members', 'owners'],
      admin: ['read', 'members'],
      billing: ['read', 'billing'],
      developer: ['read', 'keys'],
      viewer: ['read'],
    });
  });

  it('are told from other values', () => {
    expect(ROLES.every(isRole)).toBe(true);
    expect([undefined, 'root', 'Owner', 1].some(isRole)).toBe(false);
  });
});

describe('audit entries', () => {
  it('have ids that sort as they were made and differ at the same millisecond', () => {
    const at = '2026-12-07T22:15:00.000Z';
    const a = auditEntry('acct', { kind: 'system' }, 'alert.changed', at);
    const b = auditEntry('acct', { kind: 'system' }, 'alert.changed', at);
    const later = auditEntry('acct', { kind: 'system' }, 'alert.changed', '2026-12-07T22:15:00.001Z');
    expect(a.entryId).toMatch(/^2026-12-07T22:15:00\.000Z#[0-9a-f]{8}$/);
    expect(a.entryId).not.toBe(b.entryId);
    expect([later.entryId, a.entryId].sort()).toEqual([a.entryId, later.entryId]);
  });

  it(`expire ${AUDIT_RETENTION_DAYS} days after they were made (epoch seconds, the TTL attribute)`, () => {
    expect(AUDIT_RETENTION_DAYS).toBe(400);
    expect(auditExpiry('2026-01-01T00:00:00.000Z')).toBe(Date.parse('2027-02-05T00:00:00.000Z') / 1000);
  });
});
