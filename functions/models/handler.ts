import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { getStore } from '../adapters/dynamodb.js';
import { originVerifyValue } from '../adapters/secrets.js';
import { authorize } from '../core/access.js';
import { hashKey, parseBearerKey } from '../core/auth.js';
import { MethodNotAllowedError, NotFoundError } from '../core/errors.js';
import { MODELS_CREATED, MODELS_OWNER, TIER_DISPLAY_NAMES, TIER_IDS } from '../core/tiers.js';
import {
  type FunctionUrlEvent,
  type FunctionUrlResult,
  header,
  httpErrorHandler,
  jsonResponse,
  originVerify,
  requestIdOf,
  requestMetrics,
} from '../shared/http.js';
import { logger } from '../shared/observability.js';

/**
 * The models function: a buffered Function URL behind CloudFront's default behaviour, so it also
 * answers every other path: 404 for unknown ones (the announced endpoints of spec 4.3 included), 405
 * for a wrong method.
 */
const MODEL_LIST = {
  object: 'list',
  data: TIER_IDS.map((id) => ({
    id,
    object: 'model',
    created: MODELS_CREATED,
    owned_by: MODELS_OWNER,
    display_name: TIER_DISPLAY_NAMES[id],
  })),
};

/** Paths this service serves, and the methods each allows. */
const ROUTES: Record<string, readonly string[]> = {
  '/api/v1/models': ['GET'],
};

async function models(event: FunctionUrlEvent, context: Context): Promise<FunctionUrlResult> {
  const path = event.rawPath.replace(/\/+$/, '') || '/';
  const allowed = ROUTES[path];
  if (!allowed) throw new NotFoundError(`No such endpoint: ${event.rawPath}`);
  const method = event.requestContext.http.method;
  if (!allowed.includes(method)) throw new MethodNotAllowedError(method, allowed);
  const key = parseBearerKey(header(event, 'authorization'));
  authorize(await getStore().loadPrincipal(hashKey(key)), { requireCredit: false, topUpUrl: '' });
  return jsonResponse(200, MODEL_LIST, { 'x-request-id': requestIdOf(context) });
}

export const handler = middy<FunctionUrlEvent, FunctionUrlResult>()
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .use(requestMetrics())
  .use(httpErrorHandler())
  .use(originVerify(originVerifyValue))
  .handler(models);
