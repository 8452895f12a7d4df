/**
 * What the models function answers (a buffered Function URL behind CloudFront's default behaviour):
 * the model list and one model, and, with the caller's own key only, its credits and one of its
 * generations. Every other path is 404 (the announced endpoints of spec 4.3 included), a known path
 * with the wrong method 405. The caller is already authenticated (handler.ts, a `before` middleware).
 */
import type { Principal } from '../core/access.js';
import { BadRequestError, MethodNotAllowedError, NotFoundError } from '../core/errors.js';
import { nanoToUsd } from '../core/money.js';
import type { Store } from '../core/store.js';
import { MODELS_CREATED, MODELS_OWNER, TIER_DISPLAY_NAMES, TIER_IDS } from '../core/tier-ids.js';
import { JsonDecimal } from '../core/usage.js';
import type { FunctionUrlEvent } from '../shared/http.js';

export const MODELS_PATH = '/api/v1/models';
export const CREDITS_PATH = '/api/v1/credits';
export const GENERATION_PATH = '/api/v1/generation';

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
const MODEL_BY_ID = new Map(MODEL_LIST.data.map((model) => [`${MODELS_PATH}/${model.id}`, model]));

/** The normalised path, if this function serves it (before authentication: a 404 needs no key). */
export function routeOf(event: FunctionUrlEvent): string {
  const path = event.rawPath.replace(/\/+$/, '') || '/';
  const known =
    path === MODELS_PATH ||
    path.startsWith(`${MODELS_PATH}/`) ||
    path === CREDITS_PATH ||
    path === GENERATION_PATH;
  if (!known) throw new NotFoundError(`No such endpoint: ${event.rawPath}`);
  const method = event.requestContext.http.method;
  if (method !== 'GET') throw new MethodNotAllowedError(method, ['GET']);
  return path;
}

export async function answer(
  path: string,
  event: FunctionUrlEvent,
  principal: Principal,
  store: Pick<Store, 'getLedgerEntry'>,
): Promise<unknown> {
  if (path === CREDITS_PATH) return credits(principal);
  if (path === GENERATION_PATH) return generation(event, principal, store);
  const body = path === MODELS_PATH ? MODEL_LIST : MODEL_BY_ID.get(path);
  if (!body)
    throw new NotFoundError(
      `The model '${path.slice(MODELS_PATH.length + 1)}' does not exist; use svc-fast, svc-pro or svc-heavy.`,
    );
  return body;
}

/** GET /api/v1/credits: the balance (the spec's creditBalance), what requests in flight hold, and what is left. */
function credits(principal: Principal) {
  return {
    object: 'credits',
    balance: new JsonDecimal(nanoToUsd(principal.balanceNano)),
    held: new JsonDecimal(nanoToUsd(principal.heldNano)),
    available: new JsonDecimal(nanoToUsd(principal.balanceNano - principal.heldNano)),
    currency: 'USD',
  };
}

const GENERATION_ID = /^gen-\d{1,12}-[0-9A-Za-z]{1,40}$/;

/** GET /api/v1/generation?id=<generation id>: one of this account's ledger entries, as billed. */
async function generation(
  event: FunctionUrlEvent,
  principal: Principal,
  store: Pick<Store, 'getLedgerEntry'>,
) {
  const id = event.queryStringParameters?.id;
  if (!id) throw new BadRequestError("Missing required parameter: 'id'.", 'id', 'missing_required_parameter');
  if (!GENERATION_ID.test(id))
    throw new BadRequestError(
      `Invalid value for 'id': expected a generation id like gen-1767225600-...`,
      'id',
      'invalid_value',
    );
  // The ledger is keyed by account: another account's generation is simply not found here.
  const entry = await store.getLedgerEntry(principal.accountId, id);
  if (entry?.type !== 'charge') throw new NotFoundError(`No generation ${id} on this account.`);
  const prompt = entry.promptTokens ?? 0;
  const completion = entry.completionTokens ?? 0;
  return {
    id: entry.entryId,
    object: 'generation',
    model: entry.tier ?? null,
    created: Math.floor(Date.parse(entry.createdAt) / 1000),
    created_at: entry.createdAt,
    finish_reason: entry.finishReason ?? null,
    usage: {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
      prompt_tokens_details: { cached_tokens: entry.cachedTokens ?? 0 },
      cost: new JsonDecimal(nanoToUsd(-entry.deltaNano)),
    },
    estimated: entry.estimated ?? false,
    usage_adjusted: entry.usageAdjusted ?? null,
    key_id: entry.keyId ?? null,
    user: entry.user ?? null,
  };
}
