/** Accounts, keys and charges for tests, made through the store port (any implementation of it). */

import { generateApiKey } from '../../functions/core/auth.js';
import { newGenerationId } from '../../functions/core/ids.js';
import { usdToNano } from '../../functions/core/money.js';
import type { ChargeEntry, Store } from '../../functions/core/store.js';
import type { UpstreamTarget } from '../../functions/core/tiers.js';

let counter = 0;

/** An active account in `store` with `usd` of credit and one active key: its id, the key and its hash and id. */
export async function accountWith(
  store: Pick<Store, 'createAccount' | 'createKey'>,
  usd: string,
  accountId = `acct-${Date.now().toString(36)}-${++counter}`,
) {
  await store.createAccount(accountId, usdToNano(usd), new Date().toISOString());
  return { accountId, ...(await keyFor(store, accountId)) };
}

/** A new active key of `accountId`, named `name` (createKey's options given): the key and its hash and id. */
export async function keyFor(
  store: Pick<Store, 'createKey'>,
  accountId: string,
  name = 'test',
  options: { maxActive?: number } = {},
) {
  const key = generateApiKey();
  await store.createKey(
    {
      keyHash: key.keyHash,
      keyId: key.keyId,
      accountId,
      name,
      displayPrefix: key.displayPrefix,
      status: 'active',
      createdAt: new Date().toISOString(),
    },
    options,
  );
  return { key: key.key, keyHash: key.keyHash, keyId: key.keyId };
}

/** A charge of `billedNano` for a new generation (10 prompt and 5 completion tokens of svc-fast). */
export function chargeEntry(
  accountId: string,
  keyId: string,
  billedNano: bigint,
  fields: Partial<ChargeEntry> = {},
): ChargeEntry {
  return {
    accountId,
    // On slice 0, as an unsplit account's generations are (a generation id names its slice).
    generationId: newGenerationId(Date.now(), 0),
    keyId,
    tier: 'svc-fast',
    upstreamModel: 'sim-fast',
    promptTokens: 10,
    completionTokens: 5,
    cachedTokens: 0,
    upstreamCostUsd: '0.000001',
    billedNano,
    estimated: false,
    createdAt: new Date().toISOString(),
    ...fields,
  };
}

/**
 * An upstream target priced in round numbers: $1 per million input tokens, $0.10 cached, $2 output
 * (femto-USD per million tokens), so 1,000 + 500 tokens bill 2,600,000 nano-USD; it reports its cost.
 */
export const PRICED_TARGET: UpstreamTarget = {
  baseUrl: 'http://127.0.0.1:9/v1',
  model: 'upstream-model',
  prices: { input: 10n ** 15n, cachedInput: 10n ** 14n, output: 2n * 10n ** 15n },
  reportsCost: true,
  extraFields: 'forward',
};
