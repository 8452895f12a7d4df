import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { getStore } from '../adapters/dynamodb/index.js';
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

/**
 * GET /api/v1/models, and GET /api/v1/models/{id} for one tier (what `client.models.retrieve()`
 * calls in the OpenAI SDK). Everything else routed here is 404, or 405 for a known path.
 */
const MODELS_PATH = '/api/v1/models';
const MODEL_BY_ID = new Map(MODEL_LIST.data.map((model) => [`${MODELS_PATH}/${model.id}`, model]));

async function models(event: FunctionUrlEvent, context: Context): Promise<FunctionUrlResult> {
  const path = event.rawPath.replace(/\/+$/, '') || '/';
  const isModelPath = path === MODELS_PATH || path.startsWith(`${MODELS_PATH}/`);
  if (!isModelPath) throw new NotFoundError(`No such endpoint: ${event.rawPath}`);
  const method = event.requestContext.http.method;
  if (method !== 'GET') throw new MethodNotAllowedError(method, ['GET']);
  const key = parseBearerKey(header(event, 'authorization'));
  authorize(await getStore().loadPrincipal(hashKey(key)), { requireCredit: false, topUpUrl: '' });
  const body = path === MODELS_PATH ? MODEL_LIST : MODEL_BY_ID.get(path);
  if (!body)
    throw new NotFoundError(
      `The model '${path.slice(MODELS_PATH.length + 1)}' does not exist; use svc-fast, svc-pro or svc-heavy.`,
    );
  return jsonResponse(200, body, { 'x-request-id': requestIdOf(context) });
}

export const handler = middy<FunctionUrlEvent, FunctionUrlResult>()
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .use(requestMetrics())
  .use(httpErrorHandler())
  .use(originVerify(originVerifyValue))
  .handler(models);
