import * as z from 'zod';
import { PRICE_SCALE, parseDecimal } from './money.js';
import type { TierId } from './tier-ids.js';

export { TIER_IDS, type TierId } from './tier-ids.js';

/** A price in USD per million tokens, as a decimal string with at most 15 decimals. */
const PriceSchema = z
  .string()
  .regex(/^\d+(\.\d{1,15})?$/, 'a decimal string of USD per million tokens, at most 15 decimals')
  .transform((value) => parseDecimal(value, PRICE_SCALE));

const PriceTableSchema = z.object({
  input: PriceSchema,
  cachedInput: PriceSchema,
  output: PriceSchema,
  /** Prompt tokens written to the provider's cache, where it charges them (Anthropic: 1.25 x input). */
  cacheWrite: PriceSchema.optional(),
});
/** Prices in femto-USD per million tokens. */
export type PriceTable = z.output<typeof PriceTableSchema>;

const UpstreamTargetSchema = z.object({
  /** OpenAI-style base URL: requests go to `${baseUrl}/chat/completions`. */
  baseUrl: z.url({ protocol: /^https?$/ }).transform((url) => url.replace(/\/+$/, '')),
  /** The upstream's own model id. */
  model: z.string().min(1),
  /** Name of the credential (an entry of the upstream-credentials secret, or an env var locally); none for keyless upstreams. */
  credential: z.string().min(1).optional(),
  prices: PriceTableSchema,
  /**
   * Bill the upstream's own cost where it reports one in `usage.cost` (OpenRouter does), as the price
   * rule says (its cost x 1.3); the price table is for replies without one. On by default, also for the
   * short form `UPSTREAM_BASE_URL`; `false` ignores a reported cost (an upstream whose figure is not
   * what it charges).
   */
  reportsCost: z.boolean().default(true),
  /**
   * Request fields outside OpenAI's schema (`provider`, `top_k`, `reasoning` on messages,
   * `cache_control`...): `forward` them (OpenRouter, vLLM, llama.cpp take them) or `drop` them
   * (OpenAI refuses unknown arguments). forwarding.ts.
   */
  extraFields: z.enum(['forward', 'drop']).default('forward'),
});
export type UpstreamTarget = z.output<typeof UpstreamTargetSchema>;

/**
 * The output cap of a request that sets neither `max_completion_tokens` nor `max_tokens`: what the
 * gateway bounds a reply, a reported usage and a hold by. 8,192 tokens take about 100 s at 80 tokens/s.
 */
export const DEFAULT_MAX_OUTPUT_TOKENS = 8_192;

/** The context length `/models` states for a tier that sets none (tokens, prompt and reply together). */
const DEFAULT_CONTEXT_LENGTH = 128_000;

const TargetsSchema = z.array(UpstreamTargetSchema).min(1);
/**
 * A tier: its targets in fallback order, its default output cap, and the context length `/models`
 * states for it. A bare array is the targets alone.
 */
const TierSchema = z.union([
  TargetsSchema.transform((targets) => ({
    targets,
    maxOutputTokens: DEFAULT_MAX_OUTPUT_TOKENS,
    contextLength: DEFAULT_CONTEXT_LENGTH,
  })),
  z.object({
    targets: TargetsSchema,
    maxOutputTokens: z.int().positive().max(1_000_000).default(DEFAULT_MAX_OUTPUT_TOKENS),
    contextLength: z.int().positive().max(100_000_000).default(DEFAULT_CONTEXT_LENGTH),
  }),
]);
export type Tier = z.output<typeof TierSchema>;

const TierConfigSchema = z.object({
  'svc-fast': TierSchema,
  'svc-pro': TierSchema,
  'svc-heavy': TierSchema,
});
export type TierConfig = z.output<typeof TierConfigSchema>;
export type TierConfigInput = z.input<typeof TierConfigSchema>;

export class TierConfigError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'TierConfigError';
  }
}

/** Validates a tier configuration; the error names the failing field (for a cold-start failure). */
export function parseTierConfig(input: unknown): TierConfig {
  // Parsed once per cold start: jitless spares compiling zod's fast path (new Function) for one use.
  const result = TierConfigSchema.safeParse(input, { jitless: true });
  if (!result.success) {
    // A union reports "invalid input" at the tier; its branches' issues name the real field.
    let issue = result.error.issues[0];
    while (issue?.code === 'invalid_union') {
      const branches = issue.errors;
      const best = branches.find((b) => b.length > 0 && b[0]?.code !== 'invalid_type') ?? branches[0];
      const inner = best?.[0];
      if (!inner) break;
      issue = { ...inner, path: [...issue.path, ...inner.path] } as typeof issue;
    }
    const path = issue?.path.join('.') || '(root)';
    throw new TierConfigError(`invalid tier configuration at ${path}: ${issue?.message ?? 'invalid'}`);
  }
  return result.data;
}

/**
 * The most completion tokens a request may produce: its own `max_completion_tokens` / `max_tokens`
 * when given, else the tier's default.
 */
export function outputCap(
  request: { max_completion_tokens?: number | null | undefined; max_tokens?: number | null | undefined },
  tier: Pick<Tier, 'maxOutputTokens'>,
): number {
  return request.max_completion_tokens ?? request.max_tokens ?? tier.maxOutputTokens;
}

/**
 * The simulator's price table. Chosen so that the billed rates (x1.3, rounded up per request)
 * equal the spec's table: each is the spec's rate / 1.3, cut after 15 decimals, so x1.3 falls a
 * hair short and the per-request rounding up lands on the spec's figure (e.g. svc-fast input
 * 0.269230769230769 x 1.3 = 0.3499999999999997 -> $0.35 per million). Cached input is 10% of input.
 */
export const SIMULATOR_PRICES: Record<TierId, { input: string; cachedInput: string; output: string }> = {
  'svc-fast': { input: '0.269230769230769', cachedInput: '0.026923076923076', output: '1.1' },
  'svc-pro': { input: '0.553846153846153', cachedInput: '0.055384615384615', output: '2.2' },
  'svc-heavy': { input: '0.6', cachedInput: '0.06', output: '2.5' },
};

/**
 * Every tier routed to one OpenAI-compatible base URL (the simulator, or UPSTREAM_BASE_URL). A reply
 * that reports its own cost (`usage.cost`) is billed at it x 1.3; one without is priced by the
 * simulator's table below.
 * `models` maps tiers to the upstream's model ids: `svc-fast=gpt-4o-mini,svc-pro=gpt-4o,...`;
 * a tier it leaves out uses the simulator's id (`sim-fast`, ...).
 */
export function singleUpstreamConfig(baseUrl: string, credential?: string, models?: string): TierConfigInput {
  const modelOf = new Map<string, string>();
  for (const pair of (models ?? '').split(',')) {
    const [tier, model] = pair.split('=').map((part) => part.trim());
    if (tier && model) modelOf.set(tier, model);
  }
  const target = (tier: TierId) => ({
    baseUrl,
    model: modelOf.get(tier) ?? tier.replace('svc-', 'sim-'),
    ...(credential ? { credential } : {}),
    prices: { ...SIMULATOR_PRICES[tier] },
  });
  return {
    'svc-fast': [target('svc-fast')],
    'svc-pro': [target('svc-pro')],
    'svc-heavy': [target('svc-heavy')],
  };
}

/**
 * The tier routing from the environment, as the completions function reads it at its cold start:
 * TIERS_CONFIG (JSON), else every tier at one base URL (UPSTREAM_BASE_URL, with UPSTREAM_API_KEY's
 * credential name and UPSTREAM_MODELS when set, as `npm start` runs). Undefined when neither is set.
 */
export function tiersFromEnv(env: NodeJS.ProcessEnv = process.env): TierConfig | undefined {
  if (env.TIERS_CONFIG) {
    let json: unknown;
    try {
      json = JSON.parse(env.TIERS_CONFIG);
    } catch {
      throw new Error('TIERS_CONFIG is not valid JSON');
    }
    return parseTierConfig(json);
  }
  if (env.UPSTREAM_BASE_URL)
    return parseTierConfig(
      singleUpstreamConfig(
        env.UPSTREAM_BASE_URL,
        env.UPSTREAM_API_KEY ? 'UPSTREAM_API_KEY' : undefined,
        env.UPSTREAM_MODELS,
      ),
    );
  return undefined;
}
