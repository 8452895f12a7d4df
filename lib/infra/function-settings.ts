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
 * Memory sizes were chosen from `npm run bench` (docs/cost.md, docs/performance.md): Lambda bills the
 * whole wall time of a streamed generation, so memory is most of a request's infrastructure cost, and
 * the CPU share (size/1769 of a vCPU) decides what the gateway adds to the customer's wait.
 * Completions: 224 MB, where the curve of added time to first byte bends
 * (`BENCH_ONLY=ttfb npm run bench`, each instance held to its size's CPU share as a CFS quota of each
 * 20 ms period, DynamoDB's in-region latency injected, warm requests back to back, 2026-12-08 on a
 * quiet machine): a funded JSON reply added 38.8 ms at p50 at 160 MB, 28.2 at 192, 15.6 at 224 and
 * 18.5 at 256; a stream's first chunk 41.1, 30.8, 22.1 and 20.8; a cold request 3.6, 2.9, 2.3 and
 * 2.2 s. 224 MB's quota (2.5 ms a period) holds the 1.4-1.9 ms of CPU before the upstream call in one
 * period; 160 MB's (1.8 ms) does not, so a request waits for the next period. The price: the typical
 * svc-fast request's infrastructure is 12.6% of its margin at 224 MB (9.9% at 160, 13.9% at 256).
 * Memory: at 160 MB's heap limits an instance peaked at 134-144 MiB after four 5.8 MiB requests (the
 * largest a Function URL takes) whose usage was estimated; test/integration/memory-fit.test.ts holds
 * the peak 8 MiB under the configured size.
 * Models: 256 MB (it answers in milliseconds, so its size costs next to nothing, and a larger CPU
 * share shortens its cold start).
 * `cdk deploy -c completionsMemorySize=160` (or `modelsMemorySize`) overrides one at deploy time: 160
 * MB is the smallest size within 10% of the margin, for a stage that prefers cost to the wait.
 */
export const FUNCTION_SETTINGS = {
  completions: { timeoutSeconds: 300, memoryMb: 224 },
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
