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
 * a streamed generation, so memory is most of a request's infrastructure cost; completions and
 * models get the cheapest size whose CPU share kept the added latency at the unlimited run's.
 * `cdk deploy -c completionsMemorySize=512` (or `modelsMemorySize`) overrides one at deploy time.
 */
export const FUNCTION_SETTINGS = {
  completions: { timeoutSeconds: 300, memoryMb: 384 },
  models: { timeoutSeconds: 10, memoryMb: 256 },
  simulator: { timeoutSeconds: 120, memoryMb: 512 },
  sweeper: { timeoutSeconds: 60, memoryMb: 256 },
} as const satisfies Record<string, FunctionSettings>;
