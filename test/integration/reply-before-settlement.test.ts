import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usdToNano } from '../../functions/core/money.js';
import { SIMULATOR_PRICES } from '../../functions/core/tiers.js';
import { type RunningDynamo, startDynamoLocal } from '../../lib/local/dynamodb-local.js';
import { type FakeUpstream, startFakeUpstream } from '../support/fake-upstream.js';
import { readSse } from '../support/sse.js';
import { balanceNano, newAccount, startTarget, type Target } from '../support/target.js';

/**
 * The client never waits for the ledger: with DynamoDB Local paused (SIGSTOP) once the upstream has
 * answered, a JSON reply and a stream still arrive whole, carrying their cost, while the settlement
 * waits; when the database returns, the balance drops by exactly that cost, once. This file starts
 * its own DynamoDB Local so pausing it cannot disturb other test files.
 */
let dynamo: RunningDynamo;
let upstream: FakeUpstream;
let target: Target;
let paused = false;

function pause() {
  if (!dynamo.pid) throw new Error('DynamoDB Local has no pid');
  process.kill(dynamo.pid, 'SIGSTOP');
  paused = true;
}
function resume() {
  if (dynamo.pid && paused) process.kill(dynamo.pid, 'SIGCONT');
  paused = false;
}

const REPLY = 'Delivered while the ledger was away.';
const usage = { prompt_tokens: 12, completion_tokens: 8, total_tokens: 20 };

beforeAll(async () => {
  dynamo = await startDynamoLocal();
  upstream = await startFakeUpstream((body, res) => {
    // The read and any hold are done: the database stops answering from here.
    pause();
    const envelope = { id: 'up-1', created: 1, model: 'fake' };
    if (!body.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end(
        JSON.stringify({
          ...envelope,
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: REPLY }, finish_reason: 'stop' }],
          usage,
        }),
      );
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const chunk = { ...envelope, object: 'chat.completion.chunk' };
    res.write(
      `data: ${JSON.stringify({ ...chunk, choices: [{ index: 0, delta: { content: REPLY }, finish_reason: 'stop' }] })}\n\n`,
    );
    res.write(`data: ${JSON.stringify({ ...chunk, choices: [], usage })}\n\n`);
    res.end('data: [DONE]\n\n');
  });
  const tiers = Object.fromEntries(
    (['svc-fast', 'svc-pro', 'svc-heavy'] as const).map((tier) => [
      tier,
      [{ baseUrl: upstream.url, model: 'fake', prices: SIMULATOR_PRICES[tier] }],
    ]),
  );
  target = await startTarget({
    dynamoEndpoint: dynamo.endpoint,
    // A 1 s request timeout and 3 attempts per database call (the deployed defaults); the settlement
    // retries within its reserve, long enough to outlast the pause below.
    env: {
      TIERS_CONFIG: JSON.stringify(tiers),
      DYNAMODB_REQUEST_TIMEOUT_MS: '1000',
      DYNAMODB_CONNECT_TIMEOUT_MS: '1000',
    },
  });
});
afterAll(async () => {
  resume();
  await target?.stop();
  await upstream?.close();
  await dynamo?.stop();
});

describe('replies before settlement', () => {
  it.each([false, true])(
    'the reply arrives whole while the database is paused; the balance drops by its cost once it returns (stream %s)',
    async (stream) => {
      const { accountId, key } = await newAccount(target, '1000');
      const before = await balanceNano(target, accountId);
      let cost: number;
      try {
        const response = await fetch(`${target.baseUrl}/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'Hi' }], stream }),
        });
        expect(response.status).toBe(200);
        if (stream) {
          const { data, raw } = await readSse(response);
          expect(raw).toContain(REPLY);
          expect(data.at(-1)).toBe('[DONE]');
          cost = JSON.parse(data.at(-2) ?? '{}').usage.cost;
        } else {
          const body = (await response.json()) as {
            choices: { message: { content: string } }[];
            usage: { cost: number };
          };
          expect(body.choices[0]?.message.content).toBe(REPLY);
          cost = body.usage.cost;
        }
        // The whole reply came while the database was still paused.
        expect(paused).toBe(true);
      } finally {
        resume();
      }
      expect(cost).toBeGreaterThan(0);
      // balanceNano waits for the invocation (and so its settlement) to finish.
      expect(before - (await balanceNano(target, accountId))).toBe(usdToNano(String(cost)));
    },
  );
});
