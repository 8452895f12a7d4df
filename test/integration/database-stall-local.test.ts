import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dynamoTimeouts } from '../../functions/adapters/dynamodb/timeouts.js';
import { type RunningDynamo, startDynamoLocal } from '../../lib/local/dynamodb-local.js';
import { inProcessLauncher } from '../../lib/local/emulator.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

/**
 * A stalled database under `npm start`'s own DynamoDB settings (DynamoDB Local's defaults: 5 s per
 * attempt, 3 attempts): the read before the upstream call, and the account function's, still give
 * up within the read budget (5 s on DynamoDB Local), not after every attempt (15 s and more). This
 * file starts its own DynamoDB Local, paused with SIGSTOP (connections open, nothing answered), so
 * that pausing it cannot disturb other test files; database-stall.test.ts does the same with the
 * deployed defaults.
 */
const LOCAL = dynamoTimeouts({ DYNAMODB_ENDPOINT: 'http://dynamodb-local' });
const READ_BUDGET_MS = LOCAL.readBudgetMs ?? Number.POSITIVE_INFINITY;
/** The stated bound, and room for a loaded machine (the 503's own path, a slow timer). */
const BOUND_MS = READ_BUDGET_MS + 2_000;

let dynamo: RunningDynamo;
let target: Target;

beforeAll(async () => {
  dynamo = await startDynamoLocal();
  target = await startTarget({ dynamoEndpoint: dynamo.endpoint, launcher: inProcessLauncher });
});
afterAll(async () => {
  if (dynamo?.pid) process.kill(dynamo.pid, 'SIGCONT');
  await target?.stop();
  await dynamo?.stop();
});

function completion(key: string, stream: boolean) {
  return fetch(`${target.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }], stream }),
  });
}

describe("DynamoDB stalled, with DynamoDB Local's default timeouts", () => {
  it('the read budget is shorter than the attempts it bounds', () => {
    expect(READ_BUDGET_MS).toBeLessThan(LOCAL.maxAttempts * LOCAL.requestTimeoutMs);
  });

  it('a completion (JSON and stream), /models and /credits answer 503 within the read budget', async () => {
    const { key } = await newAccount(target);
    // Warm: the key's account is known to both functions, so the paused read is the hot path's one.
    expect((await completion(key, false)).status).toBe(200);
    const models = () => fetch(`${target.baseUrl}/models`, { headers: { authorization: `Bearer ${key}` } });
    expect((await models()).status).toBe(200);
    if (!dynamo.pid) throw new Error('DynamoDB Local has no pid');
    process.kill(dynamo.pid, 'SIGSTOP');
    const took: Record<string, number> = {};
    try {
      const calls: [string, () => Promise<Response>][] = [
        ['json', () => completion(key, false)],
        ['stream', () => completion(key, true)],
        ['models', models],
        [
          'credits',
          () => fetch(`${target.baseUrl}/credits`, { headers: { authorization: `Bearer ${key}` } }),
        ],
      ];
      for (const [name, call] of calls) {
        const started = Date.now();
        const response = await call();
        await response.text();
        took[name] = Date.now() - started;
        expect(response.status, name).toBe(503);
        expect(response.headers.get('retry-after'), name).toBe('1');
      }
    } finally {
      process.kill(dynamo.pid, 'SIGCONT');
    }
    for (const [name, ms] of Object.entries(took)) expect(ms, name).toBeLessThan(BOUND_MS);
    // After SIGCONT the database answers again, and so does the service.
    expect((await completion(key, false)).status).toBe(200);
  }, 90_000);
});
