/**
 * Each function's timeout and memory size, in one place: the CDK stack deploys them and the local
 * emulator (lib/local/emulator.ts) enforces and reports the same values. Plain data, so that
 * neither side imports the other (infrastructure never imports runtime handler code).
 */
export interface FunctionSettings {
  /** The function timeout: Lambda kills an invocation still running after this. */
  timeoutSeconds: number;
  memoryMb: number;
}

/**
 * Memory sizes were chosen from `npm run bench` (docs/cost.md): Lambda bills the whole wall time of
 * a streamed generation, so memory is most of a request's infrastructure cost. Completions: 160 MB, the
 * smallest size that brings the typical svc-fast request to at most 10% of its margin (9.7-9.8%; 192 MB:
 * 11.1%, 256 MB: 13.7-13.8%). Held to 160 MB's CPU share, the typical stream's first chunk (first token
 * after 500 ms) was within one DynamoDB read + 5 ms of the unlimited run in all five runs, and a JSON
 * reply after 500 ms in four (the one miss, by 2.5 ms, was before the settlement left the SDK client).
 * Memory: at 160 MB's heap limits an instance peaked at 134-144 MiB after four 5.8 MiB requests (the
 * largest a Function URL takes) whose usage was estimated, once a request's copies were no longer
 * held, the tokenizer loaded from data, and large invocations ended with a collection
 * (test/integration/memory-fit.test.ts holds it under 152 MiB).
 * The added time to first byte by size (`BENCH_ONLY=ttfb npm run bench`, docs/performance.md, 2026-12-07)
 * kept it: 128 MB added 23 ms at p50 to a stream's first chunk and 1.0 s to a cold request over 160 MB;
 * 256 MB's warm p50s were within 160 MB's range at 15.9% of the margin instead of 10.6%.
 * Models: 256 MB (it answers in milliseconds, so its size costs next to nothing, and a larger CPU
 * share shortens its cold start).
 * `cdk deploy -c completionsMemorySize=256` (or `modelsMemorySize`) overrides one at deploy time.
 */
export const FUNCTION_SETTINGS = {
  completions: { timeoutSeconds: 300, memoryMb: 160 },
  models: { timeoutSeconds: 10, memoryMb: 256 },
  simulator: { timeoutSeconds: 120, memoryMb: 512 },
  sweeper: { timeoutSeconds: 60, memoryMb: 256 },
  // A batch of usage lines: one read, a wait of at most the settlement window (10 s), rarely a settlement.
  loggedUsage: { timeoutSeconds: 60, memoryMb: 256 },
  // Stripe's webhook: a PaymentIntent read, a refund list, a few ledger writes; Stripe waits for it.
  payments: { timeoutSeconds: 30, memoryMb: 256 },
  // The dashboard's pages: a few DynamoDB reads, at sign-in the provider's token endpoint, at checkout
  // one Stripe call. A browser waits for it; 10 s bounds a stalled call well inside CloudFront's 30 s.
  // Its Stripe calls are held to 6.5 s at worst (DASHBOARD_STRIPE_NETWORK, functions/dashboard/config.ts).
  dashboard: { timeoutSeconds: 10, memoryMb: 256 },
} as const satisfies Record<string, FunctionSettings>;
