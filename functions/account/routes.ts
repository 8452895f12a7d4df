/**
 * What the account function (deployed as "models") answers (a buffered Function URL behind CloudFront's default behaviour):
 * the model list and one model, and, with the caller's own key only, its credits, its key (at
 * OpenRouter's `/key` and at its older `/auth/key`) and one of its generations. Which paths those are, and that every other path is 404 (the announced agent and memory
 * endpoints included) and a known path with the wrong method 405, is the route table's (shared/routes.ts);
 * the request is routed and its caller authenticated before an answer here is asked for (handler.ts).
 */

import { dayOf } from '../billing/key-cap.js';
import type { Principal } from '../core/access.js';
import { hashKey, parseBearerKey } from '../core/auth.js';
import { readModelCatalog } from '../core/catalog.js';
import { AuthenticationError, BadRequestError, NotFoundError } from '../core/errors.js';
import { nanoToUsd } from '../core/money.js';
import type { LedgerEntry, Store } from '../core/store.js';
import { cutToCodePoints } from '../core/strings.js';
import { MODELS_CREATED, MODELS_OWNER, TIER_DISPLAY_NAMES, TIER_IDS } from '../core/tier-ids.js';
import { JsonDecimal } from '../core/usage.js';
import { type FunctionUrlEvent, header } from '../shared/http.js';
import type { RouteNameOf } from '../shared/routes.js';
import type { Routed } from '../shared/routing.js';

/** Each tier's context length and prices, set by the stack from the tier configuration (core/catalog.ts). */
const CATALOG = readModelCatalog(process.env.MODELS_CATALOG);

const MODEL_LIST = {
  object: 'list',
  data: TIER_IDS.map((id) => ({
    id,
    object: 'model',
    created: MODELS_CREATED,
    owned_by: MODELS_OWNER,
    display_name: TIER_DISPLAY_NAMES[id],
    // OpenRouter's field names, which LiteLLM and other tools read to budget and pick models.
    ...CATALOG[id],
  })),
};
const MODEL_BY_ID = new Map<string, (typeof MODEL_LIST.data)[number]>(
  MODEL_LIST.data.map((model) => [model.id, model]),
);

/** What a route answers with: the caller (already authenticated), the request, the store. */
interface RouteContext {
  event: FunctionUrlEvent;
  caller: Principal;
  store: Pick<
    Store,
    'getLedgerEntry' | 'getAccount' | 'totalCredits' | 'getKey' | 'keyUsage' | 'keyDailySpend'
  >;
  /** The clock (epoch ms) whose UTC day is "today" for a key's daily figures; Date.now unless a test sets it. */
  now?: () => number;
  /** Per-key daily caps on (KEY_DAILY_CAPS=on, shared/env.ts); off (the default), `/key` states no cap. */
  keyDailyCaps?: boolean;
}

/** Each route of this function in the route table (shared/routes.ts), and its answer. */
const ANSWERS: Record<RouteNameOf<'models'>, (context: RouteContext, rest: string) => unknown> = {
  models: () => MODEL_LIST,
  model: (_context, id) => modelById(id),
  credits: ({ caller, store }) => credits(caller, store),
  key: (context) => currentKey(context),
  authKey: (context) => currentKey(context),
  generation: ({ event, caller, store }) => generation(event, caller, store),
};

export async function answer(routed: Routed<RouteNameOf<'models'>>, context: RouteContext): Promise<unknown> {
  return ANSWERS[routed.name](context, routed.rest);
}

function modelById(id: string) {
  const model = MODEL_BY_ID.get(id);
  if (!model)
    throw new NotFoundError(`The model '${id}' does not exist; use svc-fast, svc-pro or svc-heavy.`);
  return model;
}

/**
 * GET /api/v1/credits: the balance (the spec's creditBalance), what requests in flight hold, and what
 * is left, of the whole account (summed over its slices: the caller's read saw one); and, in
 * OpenRouter's shape, `data`: every credit the account was given (its top-ups less the operator's
 * corrections) and what it has spent of them (that minus balance, the ledger's invariant). Exact
 * nano-USD, shown as USD.
 */
async function credits(principal: Principal, store: Pick<Store, 'getAccount' | 'totalCredits'>) {
  const [account, totalCredits] = await Promise.all([
    store.getAccount(principal.accountId),
    store.totalCredits(principal.accountId),
  ]);
  const balance = account?.balanceNano ?? principal.balanceNano;
  const held = account?.heldNano ?? principal.heldNano;
  return {
    object: 'credits',
    balance: usd(balance),
    held: usd(held),
    available: usd(balance - held),
    currency: 'USD',
    data: { total_credits: usd(totalCredits), total_usage: usd(totalCredits - balance) },
  };
}

/**
 * GET /api/v1/key (and /api/v1/auth/key): the calling key, in OpenRouter's shape (`data`), every
 * field its SDK requires: its label (the name it was created with), its usage (USD its charges have
 * spent, exact: the running total its settlements keep, store.keyUsage), its daily spend cap in
 * OpenRouter's fields (core/store.ts, "KEY DAILY CAPS"): `limit` the cap, `limit_remaining` what is
 * left of it today (UTC; never below 0), `limit_reset` "daily" (OpenRouter's value for a limit reset
 * at 00:00 UTC; all three null for a key without a cap, and for every key while caps are off: a cap
 * stored then is not in force), `usage_daily` what the key committed today
 * (its day counters summed over the slices: its charges, and a capped key's requests in flight at
 * their worst case), no expiry, and when it was created. The fields nothing here keeps are answered
 * as docs/compatibility.md says: 0 for usage by week and month (not kept) and for BYOK usage (none),
 * null for the owners a key does not have, OpenRouter's own -1 in the deprecated rate_limit.
 */
async function currentKey({ event, caller: principal, store, now, keyDailyCaps }: RouteContext) {
  const nowMs = (now ?? Date.now)();
  // The route authenticated this very header: it parses.
  const keyHash = hashKey(parseBearerKey(header(event, 'authorization')));
  const [key, usage, today] = await Promise.all([
    store.getKey(keyHash),
    store.keyUsage(principal.accountId, principal.keyId),
    store.keyDailySpend(principal.accountId, principal.keyId, dayOf(nowMs)),
  ]);
  if (!key) throw new AuthenticationError('Invalid API key.');
  const cap = keyDailyCaps ? key.dailyCapNano : undefined;
  const remaining = cap === undefined ? undefined : cap > today ? cap - today : 0n;
  return {
    data: {
      label: key.name,
      usage: usd(usage),
      limit: cap === undefined ? null : usd(cap),
      limit_remaining: remaining === undefined ? null : usd(remaining),
      limit_reset: cap === undefined ? null : 'daily',
      is_free_tier: false,
      is_management_key: false,
      expires_at: null,
      created_at: key.createdAt,
      usage_daily: usd(today > 0n ? today : 0n),
      usage_weekly: 0,
      usage_monthly: 0,
      byok_usage: 0,
      byok_usage_daily: 0,
      byok_usage_weekly: 0,
      byok_usage_monthly: 0,
      include_byok_in_limit: false,
      is_provisioning_key: false,
      creator_user_id: null,
      organization_id: null,
      workspace_id: null,
      allowed_data_regions: ['global'],
      free_model_daily_requests: { limit: 0, remaining: 0, used: 0 },
      rate_limit: { requests: -1, interval: '10s', note: 'This field is deprecated and safe to ignore.' },
    },
  };
}

const usd = (nano: bigint) => new JsonDecimal(nanoToUsd(nano));

const GENERATION_ID = /^gen-\d{1,12}-[0-9A-Za-z]{1,40}$/;

/**
 * GET /api/v1/generation?id=<generation id>: one of this account's ledger entries, as billed, in this
 * service's fields and, in `data`, in OpenRouter's (every field its SDK requires), side by side in one
 * body. An id that is not one of this account's generations (another account's, none, not a
 * generation id at all) is 404, as OpenRouter answers it; a missing id is 400.
 */
async function generation(
  event: FunctionUrlEvent,
  principal: Principal,
  store: Pick<Store, 'getLedgerEntry'>,
) {
  const id = event.queryStringParameters?.id;
  if (!id) throw new BadRequestError("Missing required parameter: 'id'.", 'id', 'missing_required_parameter');
  const notFound = () =>
    new NotFoundError(
      `No generation ${id.length > 100 ? `${cutToCodePoints(id, 100)}...` : id} on this account.`,
    );
  // Not a generation id: no ledger entry has it, and no read is spent on finding that out.
  if (!GENERATION_ID.test(id)) throw notFound();
  // The ledger is keyed by account: another account's generation is simply not found here.
  const entry = await store.getLedgerEntry(principal.accountId, id);
  if (entry?.type !== 'charge') throw notFound();
  const prompt = entry.promptTokens ?? 0;
  const completion = entry.completionTokens ?? 0;
  const cost = new JsonDecimal(nanoToUsd(-entry.deltaNano));
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
      cost,
    },
    estimated: entry.estimated ?? false,
    usage_adjusted: entry.usageAdjusted ?? null,
    key_id: entry.keyId ?? null,
    user: entry.user ?? null,
    data: openRouterGeneration(entry, cost),
  };
}

/**
 * A charge in OpenRouter's generation shape. Its cost (`total_cost`, and `usage`, what was taken from
 * the credit) is the billed cost; its tokens, prompt and completion, are the billed counts, the same
 * in `tokens_*` and `native_tokens_*` (the upstream's count, or the gateway's estimate when
 * `estimated`). What the ledger does not keep (latency, streaming, the provider, the upstream's own
 * finish reason and id, media and search counts) is null; no key here is a BYOK key.
 */
function openRouterGeneration(entry: LedgerEntry, cost: JsonDecimal) {
  return {
    id: entry.entryId,
    created_at: entry.createdAt,
    model: entry.tier ?? '',
    api_type: 'completions',
    total_cost: cost,
    usage: cost,
    is_byok: false,
    upstream_inference_cost: null,
    cache_discount: null,
    tokens_prompt: entry.promptTokens ?? 0,
    tokens_completion: entry.completionTokens ?? 0,
    native_tokens_prompt: entry.promptTokens ?? 0,
    native_tokens_completion: entry.completionTokens ?? 0,
    native_tokens_cached: entry.cachedTokens ?? 0,
    native_tokens_reasoning: null,
    native_tokens_completion_images: null,
    finish_reason: entry.finishReason ?? null,
    native_finish_reason: null,
    external_user: entry.user ?? null,
    streamed: null,
    cancelled: null,
    latency: null,
    generation_time: null,
    moderation_latency: null,
    provider_name: null,
    provider_responses: null,
    upstream_id: null,
    router: null,
    service_tier: null,
    data_region: 'global',
    origin: '',
    http_referer: null,
    user_agent: null,
    app_id: null,
    preset_id: null,
    workspace_id: null,
    web_search_engine: null,
    num_fetches: null,
    num_search_results: null,
    num_media_prompt: null,
    num_media_completion: null,
    num_input_audio_prompt: null,
  };
}
