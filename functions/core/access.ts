import { AuthenticationError, InsufficientCreditsError, PermissionDeniedError } from './errors.js';
import { nanoToUsd } from './money.js';

export type KeyStatus = 'active' | 'revoked';
export type AccountStatus = 'active' | 'suspended' | 'banned';

/** What a principal knows of its key's daily spend cap (billing/key-cap.ts decides with it). */
export interface KeyCapView {
  capNano: bigint;
  /** How many slices the account has, as the read saw it. */
  slices: number;
  /** The key's day counters on the slice read (`YYYY-MM-DD` -> nano-USD). */
  spentByDay: Readonly<Record<string, bigint>>;
}

/** What one strongly consistent read returns about a key and its account. */
export interface Principal {
  keyId: string;
  accountId: string;
  keyStatus: KeyStatus;
  accountStatus: AccountStatus;
  /** creditBalance in nano-USD. */
  balanceNano: bigint;
  /** What the account's requests in flight hold (nano-USD); available credit is balance - held. */
  heldNano: bigint;
  /**
   * Credit of this slice marked to move to another (store.ts, Transfer), nano-USD; absent: none. It is
   * still available to a held request, not to one admitted without a hold (billing/holds.ts).
   */
  outgoingNano?: bigint;
  /**
   * Which slice of the account's balance the read saw, and the balance and held amounts above are
   * that slice's (store.ts, "slices"). 0, or absent, for an account kept in one item: the whole.
   */
  slice?: number;
  /**
   * The account's balance summed over all its slices (nano-USD), where the read found it: a split
   * account whose slices had no available credit for the request, which a 402 then states. Absent
   * otherwise (an account kept in one item: `balanceNano` is the whole).
   */
  accountBalanceNano?: bigint;
  /**
   * The key's daily spend cap and its day counters on the slice read (core/store.ts, "KEY DAILY
   * CAPS"; billing/key-cap.ts decides); absent for a key without a cap (nothing is parsed for it).
   */
  keyCap?: KeyCapView;
}

/**
 * The order of checks: unknown or revoked key 401, suspended or banned account 403,
 * and, where the request spends money, no available credit (balance minus what requests in flight
 * hold, at or below 0) is 402.
 */
export function authorize(
  principal: Principal | undefined,
  opts: { requireCredit: boolean; topUpUrl: string },
): Principal {
  if (principal?.keyStatus !== 'active') {
    throw new AuthenticationError(
      principal ? 'This API key has been revoked.' : 'Invalid API key.',
      principal ? 'revoked_api_key' : 'invalid_api_key',
    );
  }
  if (principal.accountStatus !== 'active') throw refuseStatus(principal.accountStatus);
  if (opts.requireCredit && principal.balanceNano - principal.heldNano <= 0n)
    throw refuseCredit(principal, opts.topUpUrl);
  return principal;
}

/** The one 403 of an account that is not active (suspended or banned). */
export function refuseStatus(status: Exclude<AccountStatus, 'active'>): PermissionDeniedError {
  return new PermissionDeniedError(`This account is ${status}. Contact support.`, `account_${status}`);
}

/**
 * The one 402: no available credit at the read, or all of it held when a hold was to be placed. States
 * the account's balance (over all its slices, where the read found it), and says whether it is empty
 * or held by requests in flight.
 */
export function refuseCredit(principal: Principal, topUpUrl: string): InsufficientCreditsError {
  const balanceNano = principal.accountBalanceNano ?? principal.balanceNano;
  return new InsufficientCreditsError(nanoToUsd(balanceNano), topUpUrl, { held: balanceNano > 0n });
}

/**
 * The principal with its account's balance over all slices, for a 402 to state (the slice a request
 * drew is not the account): one read of the account's slices, made on a refused request only. Where
 * the read fails or finds nothing, the principal as it was read.
 */
export async function withAccountBalance(
  principal: Principal,
  // Store.accountBalance (store.ts), named here by its shape: store.ts imports this module's types.
  store: { accountBalance(accountId: string): Promise<bigint | undefined> },
): Promise<Principal> {
  try {
    const accountBalanceNano = await store.accountBalance(principal.accountId);
    return accountBalanceNano === undefined ? principal : { ...principal, accountBalanceNano };
  } catch {
    return principal;
  }
}
