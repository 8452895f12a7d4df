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
 * Memory sizes were chosen from `npm run bench` (README "Cost"): Lambda bills the whole wall time of
 * a streamed generation, so memory is most of a request's infrastructure cost. Completions: 256 MB,
 * the cheapest size whose CPU share (the function's own process held to it) kept the added time to
 * first chunk and to a JSON reply within one DynamoDB read + 5 ms of the unlimited run in every
 * run (and holds the peak memory measured there); 192 MB passed in three runs of four, 160 MB in one.
 * Models: 256 MB (it answers in milliseconds, so its size costs next to nothing, and a larger CPU
 * share shortens its cold start).
 * `cdk deploy -c completionsMemorySize=192` (or `modelsMemorySize`) overrides one at deploy time.
 */
export const FUNCTION_SETTINGS = {
  completions: { timeoutSeconds: 300, memoryMb: 256 },
  models: { timeoutSeconds: 10, memoryMb: 256 },
  simulator: { timeoutSeconds: 120, memoryMb: 512 },
  sweeper: { timeoutSeconds: 60, memoryMb: 256 },
} as const satisfies Record<string, FunctionSettings>;
