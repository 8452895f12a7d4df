import { ORIGIN_READ_TIMEOUT_SECONDS } from '../shared/limits.js';
import type { CompletionsConfig } from './config.js';

/** What is kept back from a settlement's deadline to answer the client after it. */
const SETTLE_MARGIN_MS = 1_000;
/** An estimate stops counting this long before the settlement's deadline (core/tokens.ts CountBudget). */
const ESTIMATE_RESERVE_MS = 3_000;

/**
 * Every deadline of one generation (epoch ms), computed once when it starts from the invocation's
 * remaining time and the limits the configuration and the stack set. Lambda kills the invocation at
 * its timeout, mid-stream or not; CloudFront gives up on a JSON reply at its origin read timeout.
 */
export class Deadlines {
  /** No new upstream attempt starts after this; for JSON, the whole upstream reply is due by it. */
  readonly upstream: number;
  /** A stream stops reading its upstream here, to settle before Lambda's timeout. */
  readonly relay: number;
  /** The settlement gives up here: 1 s before Lambda's timeout, and for JSON before CloudFront's. */
  readonly settleBy: number;
  /** Counting tokens for an estimate stops here, so the settlement still runs in time. */
  readonly estimate: number;
  /** Past the function's own timeout nothing can settle a hold: the sweeper may release it then. */
  readonly holdExpiresAt: number;

  constructor(
    readonly startedAt: number,
    remainingMs: number,
    stream: boolean,
    private readonly limits: Pick<
      CompletionsConfig,
      'settleReserveMs' | 'jsonReplyTimeoutMs' | 'upstreamBudgetMs' | 'holdExpiryMarginMs'
    >,
  ) {
    const end = startedAt + remainingMs;
    this.relay = end - limits.settleReserveMs;
    this.upstream = stream
      ? Math.min(startedAt + limits.upstreamBudgetMs, this.relay)
      : Math.min(this.relay, startedAt + limits.jsonReplyTimeoutMs);
    this.settleBy =
      (stream ? end : Math.min(end, startedAt + ORIGIN_READ_TIMEOUT_SECONDS * 1000)) - SETTLE_MARGIN_MS;
    this.estimate = this.settleBy - ESTIMATE_RESERVE_MS;
    this.holdExpiresAt = end + limits.holdExpiryMarginMs;
  }

  /** The settlement call's own deadline: at most the settlement reserve from now, never past `settleBy`. */
  settleCallBy(now = Date.now()): number {
    return Math.min(this.settleBy, now + this.limits.settleReserveMs - SETTLE_MARGIN_MS);
  }

  /** The JSON reply timeout in whole seconds, as a 504 names it. */
  get jsonReplySeconds(): number {
    return Math.round(this.limits.jsonReplyTimeoutMs / 1000);
  }
}
