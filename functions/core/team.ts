/**
 * The people of an account and the record of what they did: members with one role each, e-mailed
 * invitations, and the audit log. Pure domain (no I/O); the store's part is TeamStore, which the
 * Store port extends (store.ts), implemented by the DynamoDB adapter and the in-memory store alike.
 *
 * One account, one shared balance: keys belong to the account (each records who made it), and
 * removing a member ends their sessions at once (every dashboard request reads the member's role,
 * strongly consistent) and revokes nothing of the account's.
 */
import { randomBytes } from 'node:crypto';

/** The roles, from most to least power. */
export const ROLES = ['owner', 'admin', 'billing', 'developer', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

/**
 * What a role may do on the dashboard; every route checks it on the server.
 * - `read`: see the account (Overview, keys without secrets, Activity, Billing, members, audit log);
 * - `keys`: create, rename and revoke the account's keys;
 * - `billing`: buy credit, auto top-up, alerts, billing profile, invoices and statements;
 * - `members`: invite, change the role of and remove members other than owners;
 * - `owners`: make or demote owners, remove an owner, transfer ownership.
 */
export type Permission = 'read' | 'keys' | 'billing' | 'members' | 'owners';

const GRANTS: Readonly<Record<Role, readonly Permission[]>> = {
  owner: ['read', 'keys', 'billing', 'members', 'owners'],
  admin: ['read', 'members'],
  billing: ['read', 'billing'],
  developer: ['read', 'keys'],
  viewer: ['read'],
};

export const can = (role: Role, permission: Permission): boolean => GRANTS[role].includes(permission);

export const isRole = (value: unknown): value is Role =>
  typeof value === 'string' && (ROLES as readonly string[]).includes(value);

/** A person's place on an account. */
export interface Member {
  accountId: string;
  /** The OpenID subject (`sub`) of the person. */
  subject: string;
  /** Their e-mail address, as the identity provider gave it at their last sign-in or at joining. */
  email: string;
  role: Role;
  joinedAt: string;
  /** Who invited them (subject); absent for the person whose first sign-in made the account. */
  invitedBy?: string;
}

/**
 * An invitation by e-mail: single use, expiring, and bound to the invited address (it is accepted
 * only by a signed-in person whose verified e-mail is that address). The link carries the account,
 * the invitation's id and a random token; the store keeps only the token's SHA-256.
 */
export interface Invitation {
  accountId: string;
  invitationId: string;
  /** SHA-256 (hex) of the token in the link. */
  tokenHash: string;
  /** Lower-cased. */
  email: string;
  role: Role;
  /** The inviting member's subject. */
  invitedBy: string;
  createdAt: string;
  /** Epoch seconds after which it cannot be accepted (INVITATION_TTL_SECONDS after it was made). */
  expiresAt: number;
}

export const INVITATION_TTL_SECONDS = 7 * 24 * 60 * 60;

/** Who did something recorded in the audit log. */
export interface Actor {
  /** A member on the dashboard, the operator's CLI, Stripe (a webhook or the reconciler), or the service itself (the balance watch). */
  kind: 'member' | 'operator' | 'stripe' | 'system';
  subject?: string;
  email?: string;
}

/** What was done. */
export type AuditAction =
  | 'key.created'
  | 'key.revoked'
  | 'key.renamed'
  | 'key.cap_changed'
  | 'member.invited'
  | 'member.invitation_revoked'
  | 'member.joined'
  | 'member.role_changed'
  | 'member.removed'
  | 'member.left'
  | 'ownership.transferred'
  | 'auto_top_up.changed'
  | 'alert.changed'
  | 'billing_profile.changed'
  | 'purchase'
  | 'refund'
  | 'dispute';

/**
 * One entry of the append-only audit log. Written in the same transaction as the change it records
 * (no change without its entry); never holds a secret (a key's id and prefix, never its text; an
 * invitation's id, never its token).
 */
export interface AuditEntry {
  accountId: string;
  /** Sortable and unique: the time (ISO, ms) and a random suffix. */
  entryId: string;
  at: string;
  actor: Actor;
  /** The client's IP address and User-Agent (at most 256 characters), when a person did it. */
  ip?: string;
  userAgent?: string;
  action: AuditAction;
  /** What it was done to: a key id, a member's subject or e-mail, an invitation id, a payment's reference. */
  target?: string;
  /** Plain facts of the change (`role: developer -> viewer`, `amount: $25.00`), never a secret. */
  details?: Record<string, string>;
}

/** How long an audit entry is kept (the audit table's TTL deletes it after). */
export const AUDIT_RETENTION_DAYS = 400;

/**
 * A new entry: its id the time and a random suffix (`2026-12-07T22:15:00.000Z#<8 hex>`), so that ids
 * sort as the entries were made and two at the same millisecond differ.
 */
export function auditEntry(
  accountId: string,
  actor: Actor,
  action: AuditAction,
  at: string,
  more: Pick<AuditEntry, 'target' | 'details' | 'ip' | 'userAgent'> = {},
): AuditEntry {
  return { accountId, entryId: `${at}#${randomBytes(4).toString('hex')}`, at, actor, action, ...more };
}

/** When an entry made at `at` (ISO) is deleted: AUDIT_RETENTION_DAYS later, in epoch seconds. */
export const auditExpiry = (at: string): number =>
  Math.floor(Date.parse(at) / 1000) + AUDIT_RETENTION_DAYS * 24 * 60 * 60;

/** A page of the audit log, newest first, and where the next one starts. */
export interface AuditPage {
  entries: AuditEntry[];
  next?: string;
}

/** Filters of the audit log's page and CSV. */
export interface AuditQuery {
  limit: number;
  after?: string;
  /** Entries at or after this ISO time, and before `until`. */
  since?: string;
  until?: string;
  actions?: readonly AuditAction[];
  actorSubject?: string;
}
