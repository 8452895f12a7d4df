/**
 * What `/models` says a tool can plan with, per tier, from the tier configuration: its context
 * length and its prices as OpenRouter publishes them (`pricing`: USD per token as decimal strings).
 * A price is the billed one, the primary target's table price x 1.3, rounded up to 1e-15 USD per
 * token (so it never understates a bill). Computed where the configuration is parsed (the stack, the
 * local stack) and handed to the account function as `MODELS_CATALOG`, so that function never
 * bundles the configuration's schemas.
 */
import { formatDecimal } from './money.js';
import type { TierId } from './tier-ids.js';

interface ModelFacts {
  context_length: number;
  pricing: { prompt: string; completion: string; input_cache_read: string; request: string };
}
export type ModelCatalog = Record<TierId, ModelFacts>;

/** The fields of a parsed tier that the catalog reads (core/tiers.ts's Tier). */
interface TierFacts {
  contextLength: number;
  targets: readonly { prices: { input: bigint; cachedInput: bigint; output: bigint } }[];
}

/** femto-USD per million tokens -> billed USD per token: x 13/10, / 1e6, rounded up to 1e-15 USD. */
function perToken(femtoPerMillion: bigint): string {
  // femto x 13 is in units of 1e-16 USD per million tokens = 1e-22 USD per token; 1e-15 is 1e7 of those.
  const units = femtoPerMillion * 13n;
  const step = 10_000_000n;
  return formatDecimal((units + step - 1n) / step, 15);
}

export function modelCatalog(tiers: Record<TierId, TierFacts>): ModelCatalog {
  const entries = Object.entries(tiers).map(([id, tier]) => {
    const prices = tier.targets[0]?.prices;
    const facts: ModelFacts = {
      context_length: tier.contextLength,
      pricing: {
        prompt: prices ? perToken(prices.input) : '0',
        completion: prices ? perToken(prices.output) : '0',
        input_cache_read: prices ? perToken(prices.cachedInput) : '0',
        request: '0',
      },
    };
    return [id, facts] as const;
  });
  return Object.fromEntries(entries) as ModelCatalog;
}

/** The catalog from `MODELS_CATALOG`, checked by hand (no schema library in the account function). */
export function readModelCatalog(text: string | undefined): Partial<ModelCatalog> {
  if (!text) return {};
  const parsed = JSON.parse(text) as Record<string, ModelFacts>;
  const decimal = /^\d+(\.\d+)?$/;
  for (const [id, facts] of Object.entries(parsed)) {
    const ok =
      Number.isSafeInteger(facts?.context_length) &&
      facts.context_length > 0 &&
      ['prompt', 'completion', 'input_cache_read', 'request'].every((k) =>
        decimal.test(String((facts.pricing as Record<string, unknown> | undefined)?.[k])),
      );
    if (!ok) throw new Error(`MODELS_CATALOG: invalid entry for ${id}`);
  }
  return parsed as Partial<ModelCatalog>;
}
