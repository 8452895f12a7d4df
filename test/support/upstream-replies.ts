/** What the tests that play a hostile upstream share: its reply, the client's request, the one charge it made. */
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { expect } from 'vitest';
import { ledgerOf } from './settled.js';
import { balanceNano, type Target } from './target.js';

/** A chat completion as an upstream answers it: one choice of `content`, the `usage`, and `extra` top-level fields. */
export function upstreamCompletion(
  model: string,
  content: string,
  usage: unknown,
  extra: Record<string, unknown> = {},
) {
  return {
    id: 'up-1',
    object: 'chat.completion',
    created: 1,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop', logprobs: null }],
    usage,
    ...extra,
  };
}

/** POST /chat/completions to the target with `key`: one user message to `model`, `extra` added to the body. */
export function postCompletion(
  target: Target,
  key: string,
  model: string,
  stream: boolean,
  extra: Record<string, unknown> = {},
) {
  return fetch(`${target.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model,
      messages: [{ role: 'user', content: 'Say something.' }],
      stream,
      ...extra,
    }),
  });
}

/**
 * The account's one charge, once settled, and its ledger item as stored (for the fields the admin
 * listing leaves out); the balance went down from `start` by exactly the charge.
 */
export async function oneChargeItem(target: Target, accountId: string, start: bigint) {
  const charges = (await ledgerOf(target, accountId)).filter((e) => e.type === 'charge');
  expect(charges).toHaveLength(1);
  const [charge] = charges;
  if (!charge) throw new Error('no charge');
  expect(start - (await balanceNano(target, accountId))).toBe(-charge.deltaNano);
  const { Item: item } = await target.client.send(
    new GetItemCommand({
      TableName: target.tables.ledger,
      Key: { accountId: { S: accountId }, entryId: { S: charge.entryId } },
      ConsistentRead: true,
    }),
  );
  return { charge, item };
}

/**
 * The functions' environment for a test against its own upstream: its tiers, and retries, the first
 * byte's wait and keep-alives short enough for a test.
 */
export const hostileUpstreamEnv = (tiers: unknown): Record<string, string> => ({
  TIERS_CONFIG: JSON.stringify(tiers),
  UPSTREAM_RETRY_BASE_MS: '20',
  UPSTREAM_FIRST_BYTE_TIMEOUT_MS: '1000',
  KEEPALIVE_INTERVAL_MS: '200',
});
