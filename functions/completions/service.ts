import type { Readable } from 'node:stream';
import type { ChatCompletion } from 'openai/resources/chat/completions';
import { BodyDeadlineError, openWithFallback, readBody } from '../adapters/upstream.js';
import type { UpstreamBody as ReplyBody } from '../adapters/upstream-body.js';
import { authorize, type Principal } from '../core/access.js';
import {
  GatewayTimeoutError,
  InsufficientCreditsError,
  InternalError,
  ServiceUnavailableError,
  UpstreamError,
} from '../core/errors.js';
import { toUpstreamBody, type UpstreamBody } from '../core/forwarding.js';
import { needsHold, worstCaseBilledNano } from '../core/holds.js';
import { newGenerationId } from '../core/ids.js';
import { costToUsd, nanoToUsd } from '../core/money.js';
import { priceUsage, type TokenUsage } from '../core/pricing.js';
import { type ChatRequest, parseChatRequest } from '../core/schemas.js';
import type { ChargeEntry, Hold, Store } from '../core/store.js';
import { cutToCodePoints } from '../core/strings.js';
import { outputCap, type UpstreamTarget } from '../core/tiers.js';
import { CountBudget, estimatePromptTokens, estimateTextTokens } from '../core/tokens.js';
import { cutMessage, outputByteBound, parseCompletionBody, textOf } from '../core/upstream-reply.js';
import { type UsageReport, usageForClient } from '../core/usage.js';
import { boundUsage, promptBound, type UsageLimits } from '../core/usage-bounds.js';
import {
  type FunctionUrlEvent,
  type FunctionUrlResult,
  header,
  jsonResponse,
  rawBody,
  SSE_CONTENT_TYPE,
} from '../shared/http.js';
import {
  logger,
  recordBillingFailure,
  recordGeneration,
  recordUsageOutOfBounds,
} from '../shared/observability.js';
import { loadCaller } from '../shared/principal.js';
import type { CompletionsConfig } from './config.js';
import { type RelayOutcome, relay } from './relay.js';

/** CloudFront's origin read timeout (lib/infra), and what is kept back from a deadline to answer. */
const ORIGIN_READ_TIMEOUT_MS = 60_000;
const SETTLE_MARGIN_MS = 1_000;
/** An estimate stops counting this long before the settlement's deadline (core/tokens.ts CountBudget). */
const ESTIMATE_RESERVE_MS = 3_000;

export interface CompletionsDeps {
  store: Store;
  config: CompletionsConfig;
  credential: (name: string | undefined) => Promise<string | undefined>;
}

/** A generation in progress: what settlement needs to write its ledger entry. */
interface Generation {
  id: string;
  created: number;
  principal: Principal;
  request: ChatRequest;
  target: UpstreamTarget;
  startedAt: number;
  /** What the gateway bounds this request's usage by (usage-bounds.ts). */
  outputCap: number;
  promptBound: number;
  /** Settlement gives up by then: 1 s before Lambda's timeout, and for JSON before CloudFront's. */
  settleDeadline: number;
  /** The hold this request placed, released by its settlement; none on the fast path. */
  hold: Hold | undefined;
}

/** POST /api/v1/chat/completions: authenticate, validate, call the upstream, bill, answer. */
export async function handleCompletion(
  event: FunctionUrlEvent,
  requestId: string,
  /** The function's remaining time (Lambda context): the upstream must leave room to settle. */
  remainingMs: number,
  deps: CompletionsDeps,
): Promise<FunctionUrlResult> {
  const startedAt = Date.now();
  const principal = authorize(await loadCaller(deps.store, header(event, 'authorization')), {
    requireCredit: true,
    topUpUrl: deps.config.topUpUrl,
  });
  const { request, bodyBytes } = takeChatRequest(event);
  const tier = deps.config.tiers[request.model];
  const id = newGenerationId(startedAt);
  const headers = { 'x-request-id': requestId, 'x-generation-id': id };
  // The function's own deadline: past it Lambda kills the invocation, so the relay settles before it.
  const functionDeadline = startedAt + remainingMs - deps.config.settleReserveMs;
  // A JSON reply sends nothing until it is complete: it must be done before CloudFront's origin read
  // timeout, so its upstream gets until the JSON deadline, headers and body together.
  const jsonDeadline = Math.min(functionDeadline, startedAt + deps.config.jsonReplyTimeoutMs);
  const cap = outputCap(request, tier);
  const bound = promptBound(bodyBytes, request.messages);
  const hold = await holdIfNeeded(deps, principal, {
    accountId: principal.accountId,
    holdId: id,
    amountNano: worstCaseBilledNano(bound, cap, tier.targets),
    // Past the function's own timeout nothing can settle it: the sweeper may release it then.
    expiresAt: startedAt + remainingMs + deps.config.holdExpiryMarginMs,
    createdAt: new Date(startedAt).toISOString(),
  });
  // Each target's body is built once (a retry resends it), and it says which extra fields it left out.
  const forwarded = new Map<UpstreamTarget, UpstreamBody>();
  const forwardedTo = (target: UpstreamTarget): UpstreamBody => {
    let built = forwarded.get(target);
    if (!built) {
      built = toUpstreamBody(request, target);
      forwarded.set(target, built);
    }
    return built;
  };
  let opened: Awaited<ReturnType<typeof openWithFallback>>;
  try {
    opened = await openWithFallback({
      targets: tier.targets,
      bodyFor: (target) => forwardedTo(target).body,
      credential: deps.credential,
      maxBytes: deps.config.maxResponseBytes,
      policy: request.stream
        ? deps.config.retry
        : { ...deps.config.retry, firstByteTimeoutMs: Math.max(1, jsonDeadline - startedAt) },
      deadline: request.stream
        ? Math.min(startedAt + deps.config.upstreamBudgetMs, functionDeadline)
        : jsonDeadline,
      onAttemptFailed: (info) =>
        logger.warn('upstream attempt failed', { ...info, generationId: id, tier: request.model }),
    }).catch((error: unknown) => {
      if (!request.stream && error instanceof UpstreamError && Date.now() >= jsonDeadline)
        throw new GatewayTimeoutError(Math.round(deps.config.jsonReplyTimeoutMs / 1000), { cause: error });
      throw error;
    });
  } catch (error) {
    if (hold) await releaseQuietly(deps, hold);
    throw error;
  }
  const generation: Generation = {
    id,
    created: Math.floor(startedAt / 1000),
    principal,
    request,
    target: opened.target,
    startedAt,
    outputCap: cap,
    promptBound: bound,
    hold,
    settleDeadline: request.stream
      ? startedAt + remainingMs - SETTLE_MARGIN_MS
      : Math.min(startedAt + remainingMs, startedAt + ORIGIN_READ_TIMEOUT_MS) - SETTLE_MARGIN_MS,
  };
  // Extra fields this target does not take were left out: say which (forwarding.ts).
  const { dropped } = forwardedTo(opened.target);
  if (dropped.length > 0) Object.assign(headers, { 'x-dropped-fields': dropped.join(', ').slice(0, 1_000) });
  if (!opened.stream) {
    try {
      return jsonResponse(200, await completeBuffered(generation, opened, jsonDeadline, deps), headers);
    } catch (error) {
      // Nothing was billed (a billing failure keeps its hold for the sweeper: the usage record is logged).
      if (hold && !(error instanceof InternalError)) await releaseQuietly(deps, hold);
      throw error;
    }
  }
  const stream: Readable = relay({
    events: opened.events,
    generationId: generation.id,
    tier: request.model,
    created: generation.created,
    keepAliveMs: deps.config.keepAliveMs,
    idleTimeoutMs: deps.config.idleTimeoutMs,
    deadline: functionDeadline,
    outputCap: generation.outputCap,
    abortUpstream: opened.abort,
    settle: (outcome) => settleStream(generation, outcome, deps),
  });
  return {
    statusCode: 200,
    headers: {
      ...headers,
      'content-type': SSE_CONTENT_TYPE,
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
    },
    body: stream,
  };
}

/**
 * The request, parsed and validated, and its size; the event's raw body is dropped. The event lives as
 * long as the invocation, a stream's for the whole generation, and its body (up to 6 MB, twice that in
 * memory when it holds text beyond Latin-1) is not read again. No local of the caller holds it either:
 * an async function keeps its locals across each await.
 */
function takeChatRequest(event: FunctionUrlEvent): { request: ChatRequest; bodyBytes: number } {
  const bodyText = rawBody(event);
  delete event.body;
  return { request: parseChatRequest(bodyText), bodyBytes: Buffer.byteLength(bodyText ?? '') };
}

/**
 * The fast path or a hold (core/holds.ts): an account whose available credit covers every request that
 * can run at once is served on its one read; any other places a hold first, one conditional write,
 * refused (402) when the credit is all held. A database failure here is a 503, as for the read.
 */
async function holdIfNeeded(
  deps: CompletionsDeps,
  principal: Principal,
  hold: Hold,
): Promise<Hold | undefined> {
  if (!needsHold(principal, hold.amountNano, deps.config.maxConcurrency)) return undefined;
  let placed: 'held' | 'refused';
  try {
    placed = await deps.store.placeHold(hold);
  } catch (error) {
    logger.error('hold write failed', { error: error instanceof Error ? error : String(error) });
    throw new ServiceUnavailableError({ cause: error });
  }
  if (placed === 'refused')
    throw new InsufficientCreditsError(nanoToUsd(principal.balanceNano), deps.config.topUpUrl, {
      held: principal.balanceNano > 0n,
    });
  return hold;
}

/** Gives a hold back when its request ends without a bill; a failure here leaves it to the sweeper. */
async function releaseQuietly(deps: CompletionsDeps, hold: Hold): Promise<void> {
  try {
    await deps.store.releaseHold(hold);
  } catch (error) {
    logger.warn('hold release failed; the sweeper will release it at expiry', {
      holdId: hold.holdId,
      error: error instanceof Error ? error : String(error),
    });
  }
}

/**
 * A JSON reply: the upstream's body parsed once (core/upstream-reply.ts), held to the same output bound
 * as a stream (cut with a length finish, billed on what is sent), billed, and rebuilt in OpenAI's shape.
 */
async function completeBuffered(
  generation: Generation,
  opened: { body: ReplyBody; abort: () => void },
  deadline: number,
  deps: CompletionsDeps,
): Promise<ChatCompletion> {
  let text: string;
  try {
    text = await readBody(opened.body, deadline);
  } catch (cause) {
    opened.abort();
    if (cause instanceof BodyDeadlineError)
      throw new GatewayTimeoutError(Math.round(deps.config.jsonReplyTimeoutMs / 1000), { cause });
    throw new UpstreamError(undefined, { cause });
  }
  const parsed = parseCompletionBody(text);
  if (!parsed.ok) throw new UpstreamError(undefined, { cause: new Error(`upstream body: ${parsed.reason}`) });
  const bound = outputByteBound(generation.outputCap);
  let cut = false;
  const choices = parsed.completion.choices.map((choice) => {
    if (Buffer.byteLength(textOf(choice.message)) <= bound) return choice;
    cut = true;
    return { ...choice, message: cutMessage(choice.message, bound), finish_reason: 'length' as const };
  });
  const deliveredText = choices.map((choice) => textOf(choice.message)).join('');
  const { usage, billedNano } = await bill(
    generation,
    parsed.usage,
    deliveredText,
    cut ? ['reply cut at the output cap'] : [],
    cut ? 'length' : choices[0]?.finish_reason.slice(0, 32),
    deps,
    cut,
  );
  const { system_fingerprint, service_tier } = parsed.completion;
  return {
    id: generation.id,
    object: 'chat.completion',
    created: generation.created,
    model: generation.request.model,
    choices: choices as ChatCompletion['choices'],
    usage: usageForClient(usage, nanoToUsd(billedNano)) as unknown as ChatCompletion['usage'] & {},
    ...(system_fingerprint !== undefined ? { system_fingerprint } : {}),
    ...(service_tier !== undefined ? { service_tier } : {}),
  };
}

async function settleStream(
  generation: Generation,
  outcome: RelayOutcome,
  deps: CompletionsDeps,
): Promise<unknown> {
  const notes =
    outcome.cut === 'output_cap'
      ? ['stream cut at the output cap']
      : outcome.cut === 'deadline'
        ? ['stream cut at the function deadline']
        : [];
  const finish = outcome.failure ? 'error' : outcome.cut ? 'length' : outcome.finishReason;
  const { usage, billedNano } = await bill(
    generation,
    outcome.usage,
    outcome.deliveredText,
    notes,
    finish,
    deps,
    outcome.cut !== undefined,
  );
  return usageForClient(usage, nanoToUsd(billedNano));
}

/**
 * The usage to bill: the upstream's report when it sent a readable one, else the gateway's estimate
 * (flagged); either way held to what the request could have used (usage-bounds.ts), and any
 * adjustment logged with the raw report, counted and kept on the ledger entry. Then settled.
 * `completionText` is exactly what the client was sent. A reply the gateway cut (`cut`) is billed on
 * it: its completion tokens are estimated from the delivered text, since the upstream's report (and
 * cost) covers text the client never got.
 */
async function bill(
  generation: Generation,
  report: UsageReport | undefined,
  completionText: string,
  notes: string[],
  finishReason: string | undefined,
  deps: CompletionsDeps,
  cut = false,
): Promise<{ usage: TokenUsage; billedNano: bigint }> {
  const limits: UsageLimits = {
    outputCap: generation.outputCap,
    promptBound: generation.promptBound,
    completionTextBytes: Buffer.byteLength(completionText),
  };
  let reported: TokenUsage;
  let estimated = false;
  const adjustments = [...notes];
  if (report && 'usage' in report) {
    reported = report.usage;
    adjustments.push(...report.notes);
    if (cut) {
      const budget = new CountBudget(generation.settleDeadline - ESTIMATE_RESERVE_MS);
      const { reportedCostUsd: _coversUndelivered, ...counts } = reported;
      reported = { ...counts, completionTokens: await estimateTextTokens(completionText, budget) };
      adjustments.push('completion tokens estimated from the delivered text');
      estimated = true;
    }
  } else {
    if (report) adjustments.push(`unusable usage report: ${report.invalid}`);
    // Counting stops in time for the settlement: what is left is estimated at the rate counted.
    const budget = new CountBudget(generation.settleDeadline - ESTIMATE_RESERVE_MS);
    reported = await estimateUsage(generation.request, completionText, budget);
    if (budget.extrapolatedBytes > 0)
      adjustments.push(
        `estimate: ${budget.extrapolatedBytes} bytes not counted in time, estimated at the counted rate`,
      );
    estimated = true;
  }
  const bounded = boundUsage(reported, limits, generation.target.prices);
  adjustments.push(...bounded.adjustments);
  if (adjustments.length > notes.length || (report && 'invalid' in report)) {
    recordUsageOutOfBounds({
      generationId: generation.id,
      accountId: generation.principal.accountId,
      tier: generation.request.model,
      upstreamModel: generation.target.model,
      // The upstream's own words, for the provider conversation; bounded by the body size limits.
      reportedUsage: report?.raw,
      adjustments,
    });
  }
  const billedNano = await settle(generation, bounded.usage, estimated, adjustments, finishReason, deps);
  return { usage: bounded.usage, billedNano };
}

/** One conditional write: the ledger entry under the generation id and the deduction (DESIGN section 4, step 6). */
async function settle(
  generation: Generation,
  usage: TokenUsage,
  estimated: boolean,
  adjustments: string[],
  finishReason: string | undefined,
  deps: CompletionsDeps,
): Promise<bigint> {
  const { upstreamCost, billedNano } = priceUsage(usage, generation.target);
  const entry: ChargeEntry = {
    accountId: generation.principal.accountId,
    generationId: generation.id,
    keyId: generation.principal.keyId,
    tier: generation.request.model,
    upstreamModel: generation.target.model,
    promptTokens: usage.promptTokens,
    completionTokens: usage.completionTokens,
    cachedTokens: usage.cachedTokens,
    upstreamCostUsd: costToUsd(upstreamCost),
    billedNano,
    estimated,
    ...(adjustments.length > 0 ? { usageAdjusted: adjustments.join('; ').slice(0, 1_000) } : {}),
    ...userField(generation.request),
    ...(finishReason ? { finishReason } : {}),
    createdAt: new Date().toISOString(),
  };
  try {
    // At most the settlement reserve, and never past the invocation's own deadline.
    await deps.store.settleCharge(entry, {
      ...(generation.hold ? { hold: generation.hold } : {}),
      deadline: Math.min(
        generation.settleDeadline,
        Date.now() + deps.config.settleReserveMs - SETTLE_MARGIN_MS,
      ),
    });
  } catch (error) {
    recordBillingFailure(
      // The full usage record, so the charge can be applied by hand; bigint becomes decimal text.
      { ...entry, billedNano: undefined, billedUsd: nanoToUsd(billedNano) },
      error,
    );
    throw new InternalError({ cause: error });
  }
  recordGeneration(entry.tier, entry.promptTokens, entry.completionTokens, billedNano);
  logger.info('generation settled', {
    accountId: entry.accountId,
    keyId: entry.keyId,
    generationId: entry.generationId,
    tier: entry.tier,
    promptTokens: entry.promptTokens,
    completionTokens: entry.completionTokens,
    cachedTokens: entry.cachedTokens,
    billedUsd: nanoToUsd(billedNano),
    estimated,
    latencyMs: Date.now() - generation.startedAt,
  });
  return billedNano;
}

/**
 * The request's end-user id (`user`, or OpenAI's newer `safety_identifier`), at most 256 characters,
 * cut on a code point and with any lone surrogate replaced: a client's string is stored as is, never
 * as something the database or a header refuses.
 */
function userField(request: ChatRequest): { user?: string } {
  const fields = request as { user?: unknown; safety_identifier?: unknown };
  const user = typeof fields.user === 'string' ? fields.user : fields.safety_identifier;
  return typeof user === 'string' && user !== '' ? { user: cutToCodePoints(user, 256) } : {};
}

async function estimateUsage(
  request: ChatRequest,
  completionText: string,
  budget: CountBudget,
): Promise<TokenUsage> {
  return {
    promptTokens: await estimatePromptTokens(request.messages, budget),
    completionTokens: await estimateTextTokens(completionText, budget),
    cachedTokens: 0,
  };
}
