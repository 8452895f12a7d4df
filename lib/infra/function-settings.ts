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
 * a streamed generation, so memory is most of a request's infrastructure cost. Completions: 256 MB.
 * Held to the CPU share of 160 MB or 192 MB, a typical stream (first token after 500 ms, then paced)
 * and a JSON reply stayed within one DynamoDB read + 5 ms of the unlimited run, and 160 MB would bring
 * the typical request to 9.7% of its margin; but memory rules both out: an instance peaked at 207 MiB
 * of RSS after two 5.8 MiB requests (the largest a Function URL takes) whose usage was estimated (the
 * tokenizer loads), and at 159 MiB after a 5 MiB one whose usage the upstream reported. A killed
 * instance is a request unanswered and, after a relayed stream, unbilled.
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
