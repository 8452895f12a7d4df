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
  /**
   * When the user last authenticated at the provider (the ID token's `auth_time`, epoch seconds), as of
   * the sign-in that made this session. Absent (a session from before it was kept): as good as stale.
   * Creating a key or changing auto top-up asks for a sign-in more recent than a few minutes.
   */
  authTime?: number;
  /** Epoch seconds at which it ends (the dashboard table's TTL attribute). */
  expiresAt: number;
}

/**
 * What a dashboard POST leaves for the page its redirect shows (Post/Redirect/Get), read once: the
 * store deletes it as it is read, and a notice not read by `until` is never shown.
 */
export interface SessionNotice {
  /** A key just created: its full text, shown this once and never kept after (the store has its hash). */
  created?: { name: string; key: string };
  /** The hash of a key just changed (revoked, capped): read by its hash, as an index may not show it yet. */
  changedKeyHash?: string;
  /**
   * An invitation just made: the address and its link (the token in it is shown to the inviter this
   * once, to pass on should the e-mail not arrive; it works only for the invited address).
   */
  invited?: { email: string; link: string };
  /** What a change on the Members page did, said on the page it leads to. */
  done?: string;
  /** Epoch seconds after which it is not shown. */
  until: number;
}
