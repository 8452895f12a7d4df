import type { RetryPolicy } from '../adapters/upstream.js';
import type { RequestPathStore } from '../core/store-request.js';
import { type TierConfig, tiersFromEnv } from '../core/tiers.js';
import { keyDailyCapsOn, positiveIntFromEnv } from '../shared/env.js';

/** Everything the completions function reads from its environment, checked once at cold start. */
export interface CompletionsConfig {
  tiers: TierConfig;
  topUpUrl: string;
  /** A stream is never silent longer than this: an SSE comment goes out (below CloudFront's 60 s read timeout). */
  keepAliveMs: number;
  /** Retries and timeouts before the first byte (per attempt and per target). */
  retry: RetryPolicy;
  /** The most time spent reaching upstreams before giving up with 502. */
  upstreamBudgetMs: number;
  /** Time kept back from the function's timeout to settle the bill. */
  settleReserveMs: number;
  /**
   * No bytes from the upstream within this, mid-stream: the stream ends with an error event. Longer
   * than CloudFront's read timeout on purpose: keep-alives hold the client, and a reasoning model may
   * pause for a minute or more; the function deadline bounds it in any case.
   */
  idleTimeoutMs: number;
  /**
   * A `stream: false` request must have its whole upstream reply within this (below CloudFront's 60 s
   * origin read timeout, with room to settle), else 504 and nothing charged.
   */
  jsonReplyTimeoutMs: number;
  /**
   * How many completions can run at once (set by the stack: the function's reserved concurrency, or
   * the account's concurrency limit where nothing is reserved; AWS's default account limit otherwise): an account whose available credit covers this many of a
   * request's worst case is served without a hold.
   */
  maxConcurrency: number;
  /** A hold expires this long after its function's own timeout (the sweeper releases it then). */
  holdExpiryMarginMs: number;
  /** Upper bound on a buffered (non-streaming) upstream body. */
  maxResponseBytes: number;
  /** Per-key daily spend caps enforced (KEY_DAILY_CAPS=on, shared/env.ts); off, a stored cap is ignored. */
  keyDailyCaps: boolean;
  /** Where a key's cap is raised or removed (the dashboard's Settings → API page), for the cap's 402. */
  keyCapsUrl?: string;
}

/**
 * The 402's `topUpUrl` where no page to pay on is deployed (a sandbox without a dashboard, or a process
 * given no TOP_UP_URL): under .invalid, which never resolves (RFC 6761), so it can never send a
 * customer to someone else's site, and its name says what is missing.
 */
export const NO_DASHBOARD_TOP_UP_URL = 'https://no-dashboard-deployed.invalid/dashboard/billing';

export function loadCompletionsConfig(env: NodeJS.ProcessEnv = process.env): CompletionsConfig {
  const tiers = tiersFromEnv(env);
  if (!tiers) throw new Error('no upstream configured: set TIERS_CONFIG or UPSTREAM_BASE_URL');
  return {
    tiers,
    topUpUrl: env.TOP_UP_URL || NO_DASHBOARD_TOP_UP_URL,
    keepAliveMs: positiveIntFromEnv(env, 'KEEPALIVE_INTERVAL_MS', 10_000),
    // Before the first byte the client has seen nothing, and CloudFront gives the origin 30 s
    // (60 s as configured) to answer: a 10 s first-byte timeout per attempt and a 25 s budget for all
    // attempts and fallbacks keep a 502 inside that window.
    retry: {
      attemptsPerTarget: positiveIntFromEnv(env, 'UPSTREAM_ATTEMPTS_PER_TARGET', 2),
      baseDelayMs: positiveIntFromEnv(env, 'UPSTREAM_RETRY_BASE_MS', 200),
      maxDelayMs: positiveIntFromEnv(env, 'UPSTREAM_RETRY_MAX_MS', 5_000),
      firstByteTimeoutMs: positiveIntFromEnv(env, 'UPSTREAM_FIRST_BYTE_TIMEOUT_MS', 10_000),
    },
    upstreamBudgetMs: positiveIntFromEnv(env, 'UPSTREAM_BUDGET_MS', 25_000),
    settleReserveMs: positiveIntFromEnv(env, 'SETTLE_RESERVE_MS', 10_000),
    idleTimeoutMs: positiveIntFromEnv(env, 'UPSTREAM_IDLE_TIMEOUT_MS', 120_000),
    jsonReplyTimeoutMs: positiveIntFromEnv(env, 'JSON_REPLY_TIMEOUT_MS', 50_000),
    maxConcurrency: positiveIntFromEnv(env, 'MAX_CONCURRENCY', 1_000),
    holdExpiryMarginMs: positiveIntFromEnv(env, 'HOLD_EXPIRY_MARGIN_MS', 60_000),
    maxResponseBytes: positiveIntFromEnv(env, 'UPSTREAM_MAX_RESPONSE_BYTES', 8 * 1024 * 1024),
    keyDailyCaps: keyDailyCapsOn(env),
    ...(env.KEY_CAPS_URL ? { keyCapsUrl: env.KEY_CAPS_URL } : {}),
  };
}

/**
 * What a generation (generation.ts) and its admission (admission.ts) work through: the store, the
 * configuration and the upstream credentials.
 */
export interface GenerationPorts {
  store: RequestPathStore;
  config: CompletionsConfig;
  credential: (name: string | undefined) => Promise<string | undefined>;
  /**
   * The clock a generation starts by (epoch ms; Date.now unless a test sets it): its deadlines, its
   * ledger entry's time, and the UTC day its key's daily cap counts on.
   */
  clock?: () => number;
}
