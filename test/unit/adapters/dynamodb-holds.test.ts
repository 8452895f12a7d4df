/**
 * A hold's placement (adapters/dynamodb/holds.ts) against a DynamoDB that stops answering: each write
 * is retried (a conflict or a lost answer is safe to send again), but never past the caller's
 * deadline. Without one, a stalled database held a request for every attempt of every retry (ten
 * times the wire's own attempts: some 33 s with the deployed 1 s timeouts) before its 503.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterEach, describe, expect, it } from 'vitest';
import { Holds } from '../../../functions/adapters/dynamodb/holds.js';
import { DynamoWire } from '../../../functions/adapters/dynamodb/wire.js';

const TIMEOUTS = { connectTimeoutMs: 500, requestTimeoutMs: 200, maxAttempts: 3 };
const TABLES = { keys: 'k', accounts: 'a', ledger: 'l', holds: 'h' };

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((done) => server?.close(done) ?? done(undefined));
  server = undefined;
});

/** A DynamoDB that reads each request and never answers; counts the requests. */
async function silentDynamo(): Promise<{ endpoint: string; requests: () => number }> {
  let requests = 0;
  const silent = createServer((request) => {
    request.resume();
    requests += 1;
  });
  server = silent;
  await new Promise<void>((done) => silent.listen(0, '127.0.0.1', done));
  return { endpoint: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, requests: () => requests };
}

/** The holds adapter over a DynamoDB at `endpoint`, its direct calls with `timeouts`. */
function holdsAt(endpoint: string, timeouts: typeof TIMEOUTS) {
  const client = new DynamoDBClient({
    endpoint,
    region: 'eu-west-1',
    credentials: { accessKeyId: 'AKIDTEST', secretAccessKey: 'secret' },
  });
  return { client, holds: new Holds({ client, tables: TABLES, wire: new DynamoWire(client, timeouts) }) };
}
const HOLD = { accountId: 'acct', holdId: 'gen-1', amountNano: 5n, createdAt: '' };

describe('placing a hold', () => {
  it('gives up at the deadline when the database stays silent, however many retries it had left', async () => {
    const dynamo = await silentDynamo();
    const { client, holds } = holdsAt(dynamo.endpoint, TIMEOUTS);
    const hold = { ...HOLD, expiresAt: Date.now() + 60_000 };
    const started = Date.now();
    const failure = await holds.placeHold(hold, { deadline: started + 700 }).catch((error: unknown) => error);
    const took = Date.now() - started;
    expect(failure).toMatchObject({ name: 'TimeoutError' });
    // The deadline, plus at most one attempt's silence it had started before it.
    expect(took).toBeLessThan(700 + TIMEOUTS.requestTimeoutMs + 300);
    expect(dynamo.requests()).toBeGreaterThanOrEqual(2);
    client.destroy();
  });
});

describe('releasing a hold', () => {
  it('gives up at the deadline when the database stays silent', async () => {
    const dynamo = await silentDynamo();
    // Five attempts of 200 ms silence: 1 s without the deadline.
    const { client, holds } = holdsAt(dynamo.endpoint, { ...TIMEOUTS, maxAttempts: 5 });
    const hold = { ...HOLD, expiresAt: Date.now() };
    const started = Date.now();
    const failure = await holds
      .releaseHold(hold, { deadline: started + 300 })
      .catch((error: unknown) => error);
    expect(failure).toMatchObject({ name: 'TimeoutError' });
    expect(Date.now() - started).toBeLessThan(300 + TIMEOUTS.requestTimeoutMs + 300);
    expect(dynamo.requests()).toBeLessThan(5);
    client.destroy();
  });
});
