/**
 * A buffered function's answer before its own timeout, whatever the database does: past the budget
 * (the invocation's remaining time less a margin) the caller gets the same clean 503 with
 * Retry-After as the completions function gives, instead of Lambda's bare 502 at the timeout. The
 * budget covers every database call of the invocation (the key read, a route's own reads) without
 * each having to carry it.
 */
import type { Context } from 'aws-lambda';
import { ServiceUnavailableError } from '../core/errors.js';
import { EXPOSED_HEADERS } from './cors.js';
import { type FunctionUrlEvent, type FunctionUrlResult, jsonResponse, requestIdOf } from './http.js';
import { logger } from './observability.js';

/** Kept back from the function's timeout to send the 503. */
const ANSWER_MARGIN_MS = 1_000;

export function answerBy(
  handler: (event: FunctionUrlEvent, context: Context) => Promise<FunctionUrlResult>,
): (event: FunctionUrlEvent, context: Context) => Promise<FunctionUrlResult> {
  return async (event, context) => {
    const budget = Math.max(0, context.getRemainingTimeInMillis() - ANSWER_MARGIN_MS);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<FunctionUrlResult>((resolve) => {
      timer = setTimeout(() => {
        logger.error('no answer within the budget; answered 503', { budgetMs: budget });
        const error = new ServiceUnavailableError();
        resolve(
          jsonResponse(error.statusCode, error.toBody(), {
            ...error.headers,
            'x-request-id': requestIdOf(context),
            'access-control-allow-origin': '*',
            'access-control-expose-headers': EXPOSED_HEADERS,
          }),
        );
      }, budget);
    });
    try {
      return await Promise.race([handler(event, context), late]);
    } finally {
      clearTimeout(timer);
    }
  };
}
