/**
 * The store port's part for the dashboard's own items (the dashboard table): sessions and their
 * notices, the OpenID subjects' links to accounts, and each account's Stripe Customer as the
 * dashboard remembers it.
 */
import type { DashboardSession, SessionNotice } from './session.js';

export interface DashboardStore {
  /** Dashboard: stores a new session (a new id at every sign-in). */
  putSession(session: DashboardSession): Promise<void>;
  /** The session by its hash, strongly consistent; undefined when absent or expired at `nowSeconds`. */
  getSession(sessionHash: string, nowSeconds: number): Promise<DashboardSession | undefined>;
  /** Ends a session (sign-out): a copy of its id is worthless afterwards. */
  deleteSession(sessionHash: string): Promise<void>;
  /** Leaves a notice on a live session for the next page (replacing any); nothing if the session is gone. */
  setSessionNotice(sessionHash: string, notice: SessionNotice): Promise<void>;
  /** The session's notice, deleted as it is read (one read gets it); undefined if none, or past its `until`. */
  takeSessionNotice(sessionHash: string, nowSeconds: number): Promise<SessionNotice | undefined>;
  /** The account an OpenID subject is linked to, strongly consistent. */
  accountOfUser(subject: string): Promise<string | undefined>;
  /**
   * Links an OpenID subject to an account unless it is linked already (one conditional write), and
   * returns the account it is linked to: this one, or the one an earlier (or concurrent) sign-in linked.
   */
  linkUser(subject: string, accountId: string, now: string): Promise<string>;

  /**
   * The account's Stripe Customer id as remembered (rememberBillingCustomer), strongly consistent;
   * undefined if none is. Stripe's customer search lags its writes (up to a minute, an hour in an
   * outage), so the Customer is read from here first: payments/account-customer.ts.
   */
  billingCustomerOf(accountId: string): Promise<string | undefined>;
  /**
   * Remembers `customer` as the account's Stripe Customer in one conditional write, and returns the
   * one remembered after it: the first remembered wins. Without `replacing`, written only if the
   * account has none (else the one it has is returned, unchanged); with `replacing` (the remembered
   * Customer, which the caller found deleted in Stripe), written only if that one is still the
   * remembered one (or none is): of two callers replacing the same gone Customer at once, one writes
   * and the other gets its Customer. A Customer already remembered is returned as it is.
   */
  rememberBillingCustomer(
    accountId: string,
    customer: string,
    now: string,
    options?: { replacing?: string },
  ): Promise<string>;
}
