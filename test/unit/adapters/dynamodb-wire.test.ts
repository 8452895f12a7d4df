import { createHash, createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BatchGetItemCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DynamoWire, DynamoWireError } from '../../../functions/adapters/dynamodb/wire.js';

/**
 * The direct read (wire.ts) against a fake DynamoDB on loopback that checks each request's SigV4
 * signature from what arrived on the wire (its own implementation of AWS's published algorithm), and
 * that answers, fails, throttles or stays silent as each test needs.
 */
const CREDENTIALS = {
  accessKeyId: 'AKIDTEST',
  secretAccessKey: 'wire-test-secret',
  sessionToken: 'session-1',
};
const REGION = 'eu-west-1';
const FAST = { connectTimeoutMs: 500, requestTimeoutMs: 300, maxAttempts: 3 };

interface Seen {
  target: string | undefined;
  body: string;
  signatureValid: boolean;
  token: string | undefined;
}

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((done) => server?.close(done) ?? done(undefined));
  server = undefined;
});

const sha256 = (data: string) => createHash('sha256').update(data).digest('hex');
const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest();

/** Recomputes the request's SigV4 signature from the wire (path "/", no query string). */
function signatureValid(request: IncomingMessage, body: string): boolean {
  const auth =
    /Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=(\w+)/.exec(
      String(request.headers.authorization),
    );
  if (!auth) return false;
  const [, keyId, day, region, service, signedHeaders, signature] = auth as unknown as string[];
  if (keyId !== CREDENTIALS.accessKeyId || !day || !region || !service || !signedHeaders) return false;
  const names = signedHeaders.split(';');
  const canonicalHeaders = names.map((name) => `${name}:${String(request.headers[name]).trim()}\n`).join('');
  const canonical = [request.method, request.url, '', canonicalHeaders, signedHeaders, sha256(body)].join(
    '\n',
  );
  const amzDate = String(request.headers['x-amz-date']);
  const scope = `${day}/${region}/${service}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonical)].join('\n');
  const key = hmac(
    hmac(hmac(hmac(`AWS4${CREDENTIALS.secretAccessKey}`, day), region), service),
    'aws4_request',
  );
  return (
    names.includes('host') &&
    names.includes('x-amz-target') &&
    createHmac('sha256', key).update(toSign).digest('hex') === signature
  );
}

async function fakeDynamo(
  answer: (attempt: number, response: ServerResponse) => void,
): Promise<{ endpoint: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const fake = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      seen.push({
        target: request.headers['x-amz-target'] as string | undefined,
        body,
        signatureValid: signatureValid(request, body),
        token: request.headers['x-amz-security-token'] as string | undefined,
      });
      answer(seen.length, response);
    });
  });
  server = fake;
  await new Promise<void>((done) => fake.listen(0, '127.0.0.1', done));
  return { endpoint: `http://127.0.0.1:${(fake.address() as AddressInfo).port}`, seen };
}

function client(endpoint: string) {
  return new DynamoDBClient({ endpoint, region: REGION, credentials: CREDENTIALS, maxAttempts: 1 });
}

/** What one call through a fresh wire to `endpoint` fails with (or resolves to). */
function failureOf(endpoint: string): Promise<unknown> {
  return new DynamoWire(client(endpoint), FAST).call('BatchGetItem', INPUT).catch((error: unknown) => error);
}

function json(response: ServerResponse, status: number, body: unknown) {
  response.writeHead(status, { 'content-type': 'application/x-amz-json-1.0' }).end(JSON.stringify(body));
}

const INPUT = { RequestItems: { keys: { Keys: [{ keyHash: { S: 'abc' } }], ConsistentRead: true } } };
const OUTPUT = {
  Responses: { keys: [{ keyHash: { S: 'abc' }, accountId: { S: 'acct' } }] },
  UnprocessedKeys: {},
};

describe('the direct DynamoDB read', () => {
  it('sends a request signed as DynamoDB checks it, with the session token, and returns the answer', async () => {
    const fake = await fakeDynamo((_, response) => json(response, 200, OUTPUT));
    const wire = new DynamoWire(client(fake.endpoint), FAST);
    expect(await wire.call('BatchGetItem', INPUT)).toEqual(OUTPUT);
    expect(fake.seen).toEqual([
      {
        target: 'DynamoDB_20120810.BatchGetItem',
        body: JSON.stringify(INPUT),
        signatureValid: true,
        token: CREDENTIALS.sessionToken,
      },
    ]);
  });

  it("signs each call with the credentials the client's provider gives now: a renewed session token is used at once", async () => {
    const fake = await fakeDynamo((_, response) => json(response, 200, OUTPUT));
    // Credentials about to expire, as the SDK judges them (less than five minutes left): the client's
    // provider is asked again for every call.
    const soon = () => new Date(Date.now() + 60_000);
    let current = { ...CREDENTIALS, expiration: soon() };
    const rotating = new DynamoDBClient({
      endpoint: fake.endpoint,
      region: REGION,
      credentials: async () => current,
      maxAttempts: 1,
    });
    const wire = new DynamoWire(rotating, FAST);
    await wire.call('BatchGetItem', INPUT);
    current = { ...CREDENTIALS, sessionToken: 'renewed-session-token', expiration: soon() };
    await wire.call('BatchGetItem', INPUT);
    expect(fake.seen.map(({ token, signatureValid }) => ({ token, signatureValid }))).toEqual([
      { token: CREDENTIALS.sessionToken, signatureValid: true },
      { token: 'renewed-session-token', signatureValid: true },
    ]);
  });

  it('is checked by a verifier that accepts the SDK client and refuses a tampered request', async () => {
    const fake = await fakeDynamo((_, response) => json(response, 200, OUTPUT));
    await client(fake.endpoint).send(new BatchGetItemCommand(INPUT));
    expect(fake.seen[0]?.signatureValid).toBe(true);
    const signed = await fetch(fake.endpoint, {
      method: 'POST',
      headers: {
        authorization: `AWS4-HMAC-SHA256 Credential=${CREDENTIALS.accessKeyId}/20261123/${REGION}/dynamodb/aws4_request, SignedHeaders=host;x-amz-date;x-amz-target, Signature=${'0'.repeat(64)}`,
        'x-amz-date': '20261123T000000Z',
        'x-amz-target': 'DynamoDB_20120810.BatchGetItem',
      },
      body: '{}',
    });
    await signed.text();
    expect(fake.seen[1]?.signatureValid).toBe(false);
  });

  it('retries a 5xx and a throttle, as the SDK does, then answers', async () => {
    const fake = await fakeDynamo((attempt, response) => {
      if (attempt === 1)
        json(response, 500, { __type: 'com.amazonaws.dynamodb.v20120810#InternalServerError' });
      else if (attempt === 2)
        json(response, 400, {
          __type: 'com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException',
          message: 'slow down',
        });
      else json(response, 200, OUTPUT);
    });
    const wire = new DynamoWire(client(fake.endpoint), FAST);
    expect(await wire.call('BatchGetItem', INPUT)).toEqual(OUTPUT);
    expect(fake.seen).toHaveLength(3);
    expect(fake.seen.every((request) => request.signatureValid)).toBe(true);
  });

  it('gives up after maxAttempts with the error DynamoDB named', async () => {
    const fake = await fakeDynamo((_, response) =>
      json(response, 503, { __type: 'com.amazonaws.dynamodb.v20120810#ServiceUnavailable', message: 'down' }),
    );
    const failure = await failureOf(fake.endpoint);
    expect(failure).toBeInstanceOf(DynamoWireError);
    expect(failure).toMatchObject({ name: 'ServiceUnavailable', message: 'down', statusCode: 503 });
    expect(fake.seen).toHaveLength(3);
  });

  it('does not retry what a retry cannot fix (a validation error)', async () => {
    const fake = await fakeDynamo((_, response) =>
      json(response, 400, { __type: 'com.amazon.coral.validate#ValidationException', message: 'bad key' }),
    );
    const failure = await failureOf(fake.endpoint);
    expect(failure).toMatchObject({ name: 'ValidationException', statusCode: 400, retryable: false });
    expect(fake.seen).toHaveLength(1);
  });

  it('bounds a silent database: each attempt ends after requestTimeoutMs of silence', async () => {
    const fake = await fakeDynamo(() => {
      // Reads the request, never answers (a stalled DynamoDB).
    });
    const started = Date.now();
    const failure = await failureOf(fake.endpoint);
    const took = Date.now() - started;
    expect(failure).toMatchObject({ name: 'TimeoutError', retryable: true });
    // The fake reads each request in this same process: on a loaded machine the client's timeout
    // (a timer) can run before the fake has read the last attempt (I/O), so wait for it to be read.
    await vi.waitFor(() => expect(fake.seen.length).toBeGreaterThanOrEqual(3), { timeout: 2_000 });
    expect(fake.seen).toHaveLength(3);
    // Three attempts of 300 ms plus jittered backoff of at most 50 + 100 ms.
    expect(took).toBeGreaterThanOrEqual(3 * FAST.requestTimeoutMs - 50);
    expect(took).toBeLessThan(3 * FAST.requestTimeoutMs + 150 + 500);
  });

  it("bounds a read without a caller's deadline by the read budget, whatever attempts are left; writes and a caller's own deadline are not", async () => {
    const fake = await fakeDynamo(() => {
      // Reads the request, never answers (a stalled DynamoDB).
    });
    const timeouts = { connectTimeoutMs: 500, requestTimeoutMs: 200, maxAttempts: 5, readBudgetMs: 500 };
    const wire = new DynamoWire(client(fake.endpoint), timeouts);
    const timed = async (call: () => Promise<unknown>) => {
      const started = Date.now();
      const failure = await call().catch((error: unknown) => error);
      return { failure, took: Date.now() - started };
    };
    // A read: two full attempts, and a third with what is left of the budget if a backoff leaves any,
    // then a TimeoutError.
    const read = await timed(() => wire.call('BatchGetItem', INPUT));
    expect(read.failure).toMatchObject({ name: 'TimeoutError' });
    expect(read.took).toBeGreaterThanOrEqual(2 * timeouts.requestTimeoutMs - 50);
    expect(read.took).toBeLessThan(timeouts.readBudgetMs + 300);
    // A write (a settlement, a hold) keeps every attempt: its deadline is its caller's.
    const write = await timed(() => wire.call('TransactWriteItems', { TransactItems: [] }));
    expect(write.failure).toMatchObject({ name: 'TimeoutError' });
    expect(write.took).toBeGreaterThanOrEqual(timeouts.maxAttempts * timeouts.requestTimeoutMs - 50);
    // A read with a deadline of its own keeps it, past the budget.
    const own = await timed(() => wire.call('GetItem', INPUT, { deadline: Date.now() + 5_000 }));
    expect(own.took).toBeGreaterThanOrEqual(timeouts.maxAttempts * timeouts.requestTimeoutMs - 50);
    expect(fake.seen.filter((s) => s.target?.endsWith('.BatchGetItem')).length).toBeLessThanOrEqual(3);
  });

  it('reports a refused connection as a networking error after its attempts', async () => {
    const fake = await fakeDynamo(() => {});
    const endpoint = fake.endpoint;
    await new Promise((done) => server?.close(done));
    server = undefined;
    const failure = await failureOf(endpoint);
    expect(failure).toMatchObject({ name: 'NetworkingError', retryable: true });
  });

  it('retries an answer cut off mid-body (the connection dropped), then answers', async () => {
    const fake = await fakeDynamo((attempt, response) => {
      if (attempt < 3) {
        response.writeHead(200, { 'content-length': '500' });
        response.write('{"Responses":');
        setTimeout(() => response.socket?.destroy(), 20);
      } else json(response, 200, OUTPUT);
    });
    expect(await new DynamoWire(client(fake.endpoint), FAST).call('BatchGetItem', INPUT)).toEqual(OUTPUT);
    expect(fake.seen).toHaveLength(3);
  });

  it('fails a 200 whose body is not JSON with a named error, without retrying', async () => {
    const fake = await fakeDynamo((_, response) =>
      response.writeHead(200).end('<html>captive portal</html>'),
    );
    expect(await failureOf(fake.endpoint)).toMatchObject({
      name: 'InvalidResponse',
      statusCode: 200,
      retryable: false,
    });
    expect(fake.seen).toHaveLength(1);
  });

  it('resolves the endpoint again after a failed resolution', async () => {
    const fake = await fakeDynamo((_, response) => json(response, 200, OUTPUT));
    const url = new URL(fake.endpoint);
    let resolutions = 0;
    const flaky = new DynamoDBClient({
      region: REGION,
      credentials: CREDENTIALS,
      endpoint: async () => {
        resolutions += 1;
        if (resolutions === 1) throw new Error('endpoint not ready');
        return { protocol: 'http:', hostname: url.hostname, port: Number(url.port), path: '/' };
      },
    });
    const wire = new DynamoWire(flaky, FAST);
    await expect(wire.call('BatchGetItem', INPUT)).rejects.toThrow('endpoint not ready');
    expect(await wire.call('BatchGetItem', INPUT)).toEqual(OUTPUT);
  });

  it('reports an answer that is not JSON by its status', async () => {
    const fake = await fakeDynamo((_, response) => response.writeHead(502).end('<html>bad gateway</html>'));
    const failure = await failureOf(fake.endpoint);
    expect(failure).toMatchObject({ name: 'HTTP502', statusCode: 502 });
    expect(fake.seen).toHaveLength(3);
  });
});

describe('the direct DynamoDB settlement (TransactWriteItems)', () => {
  const TRANSACTION = {
    ClientRequestToken: 'token-1',
    TransactItems: [
      { Put: { TableName: 'ledger', Item: { entryId: { S: 'gen-1' } } } },
      { Update: { TableName: 'accounts', Key: { accountId: { S: 'acct' } } } },
    ],
  };

  it('carries the cancellation reason of each item, and does not retry a cancelled transaction', async () => {
    const fake = await fakeDynamo((_, response) =>
      json(response, 400, {
        __type: 'com.amazonaws.dynamodb.v20120810#TransactionCanceledException',
        Message:
          'Transaction cancelled, please refer cancellation reasons for specific reasons [ConditionalCheckFailed, None]',
        CancellationReasons: [
          { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed' },
          { Code: 'None' },
        ],
      }),
    );
    const failed = await new DynamoWire(client(fake.endpoint), FAST)
      .call('TransactWriteItems', TRANSACTION)
      .catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(DynamoWireError);
    expect(failed).toMatchObject({
      name: 'TransactionCanceledException',
      statusCode: 400,
      retryable: false,
      cancellationReasons: [
        { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed' },
        { Code: 'None' },
      ],
    });
    expect(fake.seen).toHaveLength(1);
    expect(fake.seen[0]).toMatchObject({
      target: 'DynamoDB_20120810.TransactWriteItems',
      body: JSON.stringify(TRANSACTION),
      signatureValid: true,
    });
  });

  it('gives up at the caller deadline, however long the database stays silent', async () => {
    const fake = await fakeDynamo(() => {});
    const slow = { connectTimeoutMs: 500, requestTimeoutMs: 5_000, maxAttempts: 3 };
    const started = Date.now();
    const failed = await new DynamoWire(client(fake.endpoint), slow)
      .call('TransactWriteItems', TRANSACTION, { deadline: started + 400 })
      .catch((error: unknown) => error);
    const took = Date.now() - started;
    expect(failed).toMatchObject({ name: 'TimeoutError', message: 'deadline passed' });
    expect(took).toBeGreaterThanOrEqual(390);
    expect(took).toBeLessThan(1_500);
    expect(fake.seen).toHaveLength(1);
  });

  it('corrects its clock from an answer that says the signature is stale, then succeeds', async () => {
    const serverNow = Date.now() + 60 * 60_000;
    const fake = await fakeDynamo((attempt, response) => {
      if (attempt === 1)
        response
          .writeHead(400, {
            'content-type': 'application/x-amz-json-1.0',
            date: new Date(serverNow).toUTCString(),
          })
          .end(
            JSON.stringify({
              __type: 'com.amazon.coral.service#InvalidSignatureException',
              message: 'Signature expired',
            }),
          );
      else json(response, 200, {});
    });
    const sdk = client(fake.endpoint);
    expect(await new DynamoWire(sdk, FAST).call('TransactWriteItems', TRANSACTION)).toEqual({});
    expect(fake.seen).toHaveLength(2);
    // The SDK client's own offset, so its calls sign with the corrected clock too.
    expect(Math.abs((sdk.config.systemClockOffset ?? 0) - 60 * 60_000)).toBeLessThan(5_000);
  });

  it('does not retry a bad signature when the clock is not the cause', async () => {
    const fake = await fakeDynamo((_, response) =>
      response
        .writeHead(400, { 'content-type': 'application/x-amz-json-1.0', date: new Date().toUTCString() })
        .end(JSON.stringify({ __type: 'com.amazon.coral.service#InvalidSignatureException', message: 'no' })),
    );
    expect(await failureOf(fake.endpoint)).toMatchObject({
      name: 'InvalidSignatureException',
      retryable: false,
    });
    expect(fake.seen).toHaveLength(1);
  });
});
