/**
 * Limits the stack sets and the functions must respect, in one place: lib/infra deploys them,
 * the request path budgets its waits by them. Plain data (no imports), so either side may import it.
 */

/**
 * CloudFront's origin read timeout for the completions origin: the longest it waits for a first byte,
 * and for any gap between bytes after it. A JSON reply must be complete (settled included) before it;
 * a stream sends keep-alives well inside it.
 */
export const ORIGIN_READ_TIMEOUT_SECONDS = 60;
