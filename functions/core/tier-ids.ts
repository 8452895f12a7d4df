/**
 * The public tiers and the model objects' fixed fields: plain constants, apart from tiers.ts so that a
 * function which only lists the models (functions/account) does not bundle or build tiers.ts's zod schemas.
 */

/** The three public tiers (the product's three tiers), in the order the model list shows them. */
export const TIER_IDS = ['svc-fast', 'svc-pro', 'svc-heavy'] as const;
export type TierId = (typeof TIER_IDS)[number];

export const TIER_DISPLAY_NAMES: Record<TierId, string> = {
  'svc-fast': 'SVC Fast',
  'svc-pro': 'SVC Pro',
  'svc-heavy': 'SVC Heavy',
};

export const MODELS_OWNER = 'hosted-model-api';
/** A fixed creation time for the model objects (OpenAI's schema requires `created`). */
export const MODELS_CREATED = 1_767_225_600; // 2026-01-01T00:00:00Z
