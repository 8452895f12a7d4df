/**
 * A dashboard session: what the opaque id in the browser's cookie stands for, until it expires. The
 * store keeps only the id's SHA-256 (a read of the table yields no usable session id).
 */
export interface DashboardSession {
  /** SHA-256 (hex) of the session id the browser holds. */
  sessionHash: string;
  accountId: string;
  /** The OpenID subject (`sub`) who signed in. */
  subject: string;
  createdAt: string;
  /** Epoch seconds at which it ends (the dashboard table's TTL attribute). */
  expiresAt: number;
}
