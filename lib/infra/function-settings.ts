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

export const FUNCTION_SETTINGS = {
  completions: { timeoutSeconds: 300, memoryMb: 1024 },
  models: { timeoutSeconds: 10, memoryMb: 256 },
  simulator: { timeoutSeconds: 120, memoryMb: 512 },
  sweeper: { timeoutSeconds: 60, memoryMb: 256 },
} as const satisfies Record<string, FunctionSettings>;
