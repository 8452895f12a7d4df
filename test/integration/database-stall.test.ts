import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listLedger } from '../../lib/admin/operations.js';
import { type RunningDynamo, startDynamoLocal } from '../../lib/local/dynamodb-local.js';
import { startLocalStack } from '../../lib/local/stack.js';
import { readSse } from '../support/sse.js';
import { balanceNano, newAccount, type Target } from '../support/target.js';

/**
 * A database that stops answering (DynamoDB Local paused with SIGSTOP: connections open, nothing
 * answered, as a stalled network path looks). This file starts its own DynamoDB Local so pausing it
 * cannot disturb other test files. The functions run with their default timeouts: 1 s per attempt,
 * 3 attempts, so a stalled read is known in about 3.3 s.
 */
let dynamo: RunningDynamo;
let target: Target;
const STATED_BOUND_MS = 5_000;

beforeAll(async () => {
  dynamo = await startDynamoLocal();
  const local = await startLocalStack({ dynamoEndpoint: dynamo.endpoint, tablePrefix: 'stall-' });
  target = {
    baseUrl: local.baseUrl,
    admin: { client: local.client, tables: local.tables },
    local,
    stop: local.stop,
  };
});
afterAll(async () => {
  if (dynamo?.pid) process.kill(dynamo.pid, 'SIGCONT');
  await target?.stop();
  await dynamo?.stop();
});

function pause() {
  if (!dynamo.pid) throw new Error('DynamoDB Local has no pid');
  process.kill(dynamo.pid, 'SIGSTOP');
}
function resume() {
  if (dynamo.pid) process.kill(dynamo.pid, 'SIGCONT');
}

async function call(key: string, stream: boolean) {
  return fetch(`${target.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'svc-fast',
      messages: [{ role: 'user', content: 'hi [[sim:tokens=3]]' }],
      stream,
    }),
  });
}

describe('DynamoDB stalled before admission', () => {
  it('answers JSON and stream requests with a clean 503 within the stated bound, charging nothing', async () => {
    const { accountId, key } = await newAccount(target);
    // Warm: the key's account is known, so the paused read is the one consistent read of the hot path.
    expect((await call(key, false)).status).toBe(200);
    const balance = await balanceNano(target, accountId);
    pause();
    try {
      for (const stream of [false, true]) {
        const started = Date.now();
        const response = await call(key, stream);
        const elapsed = Date.now() - started;
        expect(response.status).toBe(503);
        expect(response.headers.get('retry-after')).toBe('1');
        const body = (await response.json()) as { error: { type: string; code: string; message: string } };
        expect(body.error).toMatchObject({ type: 'server_error', code: 'service_unavailable' });
        expect(body.error.message).toMatch(/Nothing was charged/);
        expect(elapsed).toBeLessThan(STATED_BOUND_MS);
      }
    } finally {
      resume();
    }
    // After SIGCONT the next request is served, and only it is billed.
    const response = await call(key, true);
    expect(response.status).toBe(200);
    const { data } = await readSse(response);
    expect(data.at(-1)).toBe('[DONE]');
    const charges = (await listLedger(target.admin, accountId)).filter((e) => e.type === 'charge');
    expect(charges).toHaveLength(2);
    expect(balance - (await balanceNano(target, accountId))).toBe(-(charges[1]?.deltaNano ?? 0n));
  });
});
