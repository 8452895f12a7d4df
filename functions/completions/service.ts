import type { Readable } from 'node:stream';
import type { ChargeEntry, DynamoStore } from '../adapters/dynamodb.js';
import { openWithFallback, readBodyBounded } from '../adapters/upstream.js';
import { authorize, type Principal } from '../core/access.js';
import { hashKey, parseBearerKey } from '../core/auth.js';
import { InternalError, UpstreamError } from '../core/errors.js';
import { newGenerationId } from '../core/ids.js';
import { costToUsd, nanoToUsd } from '../core/money.js';
import { priceUsage, type TokenUsage } from '../core/pricing.js';
import { type ChatRequest, parseChatRequest } from '../core/schemas.js';
import type { UpstreamTarget } from '../core/tiers.js';
import { estimatePromptTokens, estimateTextTokens, textOfContent } from '../core/tokens.js';
import { readUpstreamUsage, usageForClient } from '../core/usage.js';
import {
  type FunctionUrlEvent,
  type FunctionUrlResult,
  header,
  jsonResponse,
  rawBody,
  SSE_CONTENT_TYPE,
} from '../shared/http.js';
import { logger, recordBillingFailure, recordGeneration } from '../shared/observability.js';
import type { CompletionsConfig } from './config.js';
import { type RelayOutcome, relay } from './relay.js';

export interface CompletionsDeps {
  store: DynamoStore;
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
  const key = parseBearerKey(header(event, 'authorization'));
  const principal = authorize(await deps.store.loadPrincipal(hashKey(key)), {
    requireCredit: true,
    topUpUrl: deps.config.topUpUrl,
  });
  const request = parseChatRequest(rawBody(event));
  const targets = deps.config.tiers[request.model].targets;
  const id = newGenerationId(startedAt);
  const headers = { 'x-request-id': requestId, 'x-generation-id': id };
  const deadline = Math.min(
    startedAt + deps.config.upstreamBudgetMs,
    startedAt + remainingMs - deps.config.settleReserveMs,
  );
  const opened = await openWithFallback({
    targets,
    bodyFor: (target) => toUpstreamBody(request, target),
    credential: deps.credential,
    policy: deps.config.retry,
    deadline,
    onAttemptFailed: (info) =>
      logger.warn('upstream attempt failed', { ...info, generationId: id, tier: request.model }),
  });
  const generation: Generation = {
    id,
    created: Math.floor(startedAt / 1000),
    principal,
    request,
    target: opened.target,
    startedAt,
  };
  const body = opened.response.body;
  if (!body) throw new UpstreamError();

  if (!request.stream) {
    return jsonResponse(200, await completeBuffered(generation, opened.response, deps), headers);
  }
  const stream: Readable = relay({
    body,
    generationId: generation.id,
    tier: request.model,
    created: generation.created,
    keepAliveMs: deps.config.keepAliveMs,
    idleTimeoutMs: deps.config.idleTimeoutMs,
    maxBytes: deps.config.maxResponseBytes,
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

/** What the upstream receives: the client's fields, our upstream model id, and always a usage report. */
function toUpstreamBody(request: ChatRequest, target: UpstreamTarget): Record<string, unknown> {
  const body: Record<string, unknown> = { ...request, model: target.model };
  if (request.stream) body.stream_options = { include_usage: true };
  else delete body.stream_options;
  return body;
}

async function completeBuffered(
  generation: Generation,
  response: Response,
  deps: CompletionsDeps,
): Promise<unknown> {
  let text: string;
  let parsed: { choices?: unknown; usage?: unknown; system_fingerprint?: unknown };
  try {
    text = await readBodyBounded(response, deps.config.maxResponseBytes);
    parsed = JSON.parse(text) as typeof parsed;
  } catch (cause) {
    throw new UpstreamError(undefined, { cause });
  }
  if (!Array.isArray(parsed.choices))
    throw new UpstreamError(undefined, { cause: new Error('upstream body has no choices') });
  const choices = parsed.choices as {
    message?: { content?: unknown; refusal?: unknown; tool_calls?: unknown };
  }[];
  let usage = readUpstreamUsage(parsed.usage, text);
  let estimated = false;
  if (!usage) {
    const completionText = choices
      .map((choice) => textOfContent(choice.message?.content) + toolCallText(choice.message?.tool_calls))
      .join('');
    usage = await estimateUsage(generation.request, completionText);
    estimated = true;
  }
  const billedNano = await settle(generation, usage, estimated, deps);
  return {
    id: generation.id,
    object: 'chat.completion',
    created: generation.created,
    model: generation.request.model,
    choices,
    usage: usageForClient(usage, nanoToUsd(billedNano)),
    ...(typeof parsed.system_fingerprint === 'string'
      ? { system_fingerprint: parsed.system_fingerprint }
      : {}),
  };
}

async function settleStream(
  generation: Generation,
  outcome: RelayOutcome,
  deps: CompletionsDeps,
): Promise<unknown> {
  let usage = outcome.usage;
  let estimated = false;
  if (!usage) {
    usage = await estimateUsage(generation.request, outcome.streamedText);
    estimated = true;
  }
  const billedNano = await settle(generation, usage, estimated, deps);
  return usageForClient(usage, nanoToUsd(billedNano));
}

/** One conditional write: the ledger entry under the generation id and the deduction (DESIGN section 4, step 6). */
async function settle(
  generation: Generation,
  usage: TokenUsage,
  estimated: boolean,
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
    createdAt: new Date().toISOString(),
  };
  try {
    await deps.store.settleCharge(entry);
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

async function estimateUsage(request: ChatRequest, completionText: string): Promise<TokenUsage> {
  return {
    promptTokens: await estimatePromptTokens(request.messages),
    completionTokens: await estimateTextTokens(completionText),
    cachedTokens: 0,
  };
}

function toolCallText(toolCalls: unknown): string {
  if (!Array.isArray(toolCalls)) return '';
  return toolCalls
    .map(
      (call: { function?: { name?: unknown; arguments?: unknown } }) =>
        `${call.function?.name ?? ''}${call.function?.arguments ?? ''}`,
    )
    .join('');
}
