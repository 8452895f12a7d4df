import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inProcessLauncher } from '../../lib/local/emulator.js';
import { watchDynamoCalls, watchOutbound } from '../support/dynamo-calls.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

/**
 * The round-trip budget (DESIGN section 4), counted, not timed: on a warm path a funded account makes
 * exactly one DynamoDB read before the upstream call and one write after the last token; a near-empty
 * one adds exactly one hold write before the upstream call; no Secrets Manager call, and no DynamoDB
 * call at all for a malformed key. The upstream credential comes from a (mocked) Secrets Manager, as
 * in Lambda. The function believes 1000 requests can run at once (MAX_CONCURRENCY, the default).
 */
const secrets = mockClient(SecretsManagerClient);
let target: Target;
let key: string;
let nearEmptyKey: string;
const events: string[] = [];

beforeAll(async () => {
  secrets
    .on(GetSecretValueCommand)
    .resolves({ SecretString: JSON.stringify({ UPSTREAM_API_KEY: 'sk-from-secrets-manager' }) });
  // The functions run in this thread (inProcessLauncher): the tests reach into their own SDK clients.
  target = await startTarget({
    launcher: inProcessLauncher,
    env: {
      UPSTREAM_SECRET_ARN: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:upstream',
      UPSTREAM_API_KEY: 'unused-locally',
    },
  });
  // $1,000 covers 1000 svc-fast requests of this size at their worst case (about $0.012 each).
  ({ key } = await newAccount(target, '1000'));
  ({ key: nearEmptyKey } = await newAccount(target, '0.05'));
  // Record the order of DynamoDB calls (as they go out on the wire) and upstream calls made by the function.
  watchDynamoCalls((call) => events.push(call));
  // Upstream calls, seen on Node's http client channels (a request to the simulator).
  const simulator = new URL(target.local?.simulatorUrl ?? 'http://invalid');
  watchOutbound((call) => {
    if (call.host === simulator.host) events.push('upstream');
  });
});
afterAll(async () => {
  await target?.stop();
  secrets.restore();
});

async function complete(stream: boolean, authorization = `Bearer ${key}`) {
  const response = await fetch(`${target.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'svc-fast',
      messages: [{ role: 'user', content: 'hi [[sim:tokens=5]]' }],
      stream,
    }),
  });
  await response.text();
  return response.status;
}

describe('the round-trip budget', () => {
  it('warms up: the first request learns the key-to-account mapping and fetches the secret once', async () => {
    events.length = 0;
    expect(await complete(false)).toBe(200);
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(1);
    expect(events.filter((e) => e.startsWith('dynamodb:GetItem'))).toHaveLength(2);
  });

  it.each([false, true])(
    'makes exactly one read before the upstream and one write after it, warm (stream %s)',
    async (stream) => {
      secrets.resetHistory();
      events.length = 0;
      expect(await complete(stream)).toBe(200);
      expect(events).toEqual(['dynamodb:BatchGetItem', 'upstream', 'dynamodb:TransactWriteItems']);
      expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(0);
    },
  );

  it('keeps the funded path under load: 40 requests at once make 40 reads, 40 settlements and no hold', async () => {
    events.length = 0;
    const statuses = await Promise.all(Array.from({ length: 40 }, (_, i) => complete(i % 2 === 0)));
    expect(statuses.every((status) => status === 200)).toBe(true);
    const count = (name: string) => events.filter((e) => e === name).length;
    expect(count('dynamodb:BatchGetItem')).toBe(40);
    expect(count('upstream')).toBe(40);
    expect(count('dynamodb:TransactWriteItems')).toBe(40);
    expect(events).toHaveLength(120);
  });

  it.each([false, true])(
    'adds exactly one hold write before the upstream for a near-empty account, and its usage record on the hold after it (stream %s)',
    async (stream) => {
      await complete(stream, `Bearer ${nearEmptyKey}`); // warm this key's mapping
      events.length = 0;
      expect(await complete(stream, `Bearer ${nearEmptyKey}`)).toBe(200);
      expect(events).toEqual([
        'dynamodb:BatchGetItem',
        'dynamodb:TransactWriteItems',
        'upstream',
        // The usage record onto the hold, so that a function killed before the settlement leaves
        // the sweeper what it needs (functions/billing/settle.ts), then the settlement.
        'dynamodb:UpdateItem',
        'dynamodb:TransactWriteItems',
      ]);
    },
  );

  it('makes no DynamoDB call at all for a malformed key', async () => {
    events.length = 0;
    expect(await complete(false, 'Bearer svc_live_not-a-real-key')).toBe(401);
    expect(await complete(false, '')).toBe(401);
    expect(events).toEqual([]);
  });
});
