/**
 * The message of a generation's usage line: the one line the completions function logs for it before
 * its settlement write (functions/billing/settle.ts), and the sweeper logs again for an expired
 * hold that kept the record. `admin bill-logged` bills from it (lib/admin/usage-records.ts) and the
 * stack's metric filters read the generation's metrics from it (lib/infra/generation-metrics.ts).
 * Plain data (no imports), so the functions, the CLI and the stack share the one name.
 */
export const GENERATION_USAGE_MESSAGE = 'generation usage';
