/**
 * The message of a generation's usage line: the one line the completions function logs for it before
 * its settlement write (functions/billing/settle.ts), and the sweeper logs again for an expired
 * hold that kept the record. The logged-usage function (delivered the line by CloudWatch Logs) and
 * `admin bill-logged` bill from it (usage-lines.ts reads it back), and the stack's metric filters
 * read the generation's metrics from it (lib/infra/generation-metrics.ts).
 * Plain data (no imports), so the functions, the CLI and the stack share the one name.
 */
export const GENERATION_USAGE_MESSAGE = 'generation usage';
