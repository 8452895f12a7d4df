import { createHash, createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { NO_SDK_CLIENT } from '../../../functions/adapters/dynamodb/client.js';
import { connectionFromEnv, regionalHost } from '../../../functions/adapters/dynamodb/connection.js';
import { cancellationReasons, queryAll, scanAll } from '../../../functions/adapters/dynamodb/store-db.js';
import { DynamoWire } from '../../../functions/adapters/dynamodb/wire.js';
import { getSecretValue } from '../../../functions/adapters/secrets-manager.js';
import { sendEmail } from '../../../functions/adapters/ses.js';

/**
 * The calls the functions make without the AWS SDK (their bundles carry none of it): DynamoDB's with
 * the region, credentials and endpoint of the environment Lambda sets (connection.ts), the store's
 * listings a page at a time, a transaction's idempotency token, and Secrets Manager's GetSecretValue
 * (secrets-manager.ts), each checked by a fake on loopback that verifies its SigV4 signature.
 */
const ENV = {
  AWS_REGION: 'eu-west-1',
  AWS_ACCESS_KEY_ID: 'AKIDENV',
  AWS_SECRET_ACCESS_KEY: 'env-secret',
  AWS_SESSION_TOKEN: 'env-session',
} as NodeJS.ProcessEnv;
const FAST = { connectTimeoutMs: 500, requestTimeoutMs: 300, maxAttempts: 3 };

interface Seen {
  target: string | undefined;
  contentType: string | undefined;
  body: string;
  /** The signature's scope (`<region>/<service>`) when it verifies with `secret`, else undefined. */
  scope: string | undefined;
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

/** The request's SigV4 scope if its signature verifies with this key pair (AWS's published algorithm). */
function verifiedScope(
  request: IncomingMessage,
  body: string,
  keyId: string,
  secret: string,
): string | undefined {
  const auth =
    /Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=(\w+)/.exec(
      String(request.headers.authorization),
    );
  if (!auth) return undefined;
  const [, id, day, region, service, signedHeaders, signature] = auth as unknown as string[];
  if (id !== keyId || !day || !region || !service || !signedHeaders) return undefined;
  const names = signedHeaders.split(';');
  const headers = names.map((name) => `${name}:${String(request.headers[name]).trim()}\n`).join('');
  const canonical = [request.method, request.url, '', headers, signedHeaders, sha256(body)].join('\n');
  const scope = `${day}/${region}/${service}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', String(request.headers['x-amz-date']), scope, sha256(canonical)].join(
    '\n',
  );
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, day), region), service), 'aws4_request');
  const valid =
    names.includes('host') && createHmac('sha256', key).update(toSign).digest('hex') === signature;
  return valid ? `${region}/${service}` : undefined;
}

async function fake(
  answer: (seen: Seen, attempt: number, response: ServerResponse) => void,
  keys: { id: string; secret: string } = { id: 'AKIDENV', secret: 'env-secret' },
): Promise<{ endpoint: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const listening = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const one: Seen = {
        target: request.headers['x-amz-target'] as string | undefined,
        contentType: request.headers['content-type'],
        body,
        scope: verifiedScope(request, body, keys.id, keys.secret),
        token: request.headers['x-amz-security-token'] as string | undefined,
      };
      seen.push(one);
      answer(one, seen.length, response);
    });
  });
  server = listening;
  await new Promise<void>((done) => listening.listen(0, '127.0.0.1', done));
  return { endpoint: `http://127.0.0.1:${(listening.address() as AddressInfo).port}`, seen };
}

function json(response: ServerResponse, status: number, body: unknown) {
  response.writeHead(status, { 'content-type': 'application/x-amz-json-1.0' }).end(JSON.stringify(body));
}

describe("DynamoDB from the function's environment", () => {
  it("signs with Lambda's credentials and region, the session token included", async () => {
    const dynamo = await fake((_, __, response) => json(response, 200, { Item: { id: { S: 'x' } } }));
    // DYNAMODB_ENDPOINT set and credentials given: as the local emulator runs a function (the
    // regional endpoint is not reachable here); the session token is Lambda's only, as it was.
    const local = connectionFromEnv({ ...ENV, DYNAMODB_ENDPOINT: dynamo.endpoint });
    const wire = new DynamoWire(local, FAST);
    expect(await wire.call('GetItem', { TableName: 't', Key: { id: { S: 'x' } } })).toEqual({
      Item: { id: { S: 'x' } },
    });
    expect(dynamo.seen[0]).toMatchObject({
      target: 'DynamoDB_20120810.GetItem',
      scope: 'eu-west-1/dynamodb',
      token: undefined,
    });
    const lambda = connectionFromEnv(ENV);
    expect(await lambda.credentials()).toEqual({
      accessKeyId: 'AKIDENV',
      secretAccessKey: 'env-secret',
      sessionToken: 'env-session',
    });
    expect(await lambda.endpoint()).toEqual({
      protocol: 'https:',
      hostname: 'dynamodb.eu-west-1.amazonaws.com',
      port: undefined,
      path: '/',
    });
  });

  it('signs locally as `local` when the emulator set no credentials, and fails by name in Lambda without them', async () => {
    const dynamo = await fake((_, __, response) => json(response, 200, {}), { id: 'local', secret: 'local' });
    const wire = new DynamoWire(connectionFromEnv({ DYNAMODB_ENDPOINT: dynamo.endpoint }), FAST);
    await wire.call('GetItem', { TableName: 't', Key: { id: { S: 'x' } } });
    expect(dynamo.seen[0]?.scope).toBe('local/dynamodb');
    await expect(connectionFromEnv({ AWS_REGION: 'eu-west-1' }).credentials()).rejects.toMatchObject({
      name: 'CredentialsProviderError',
    });
    await expect(connectionFromEnv({}).region()).rejects.toThrow(/AWS_REGION is not set/);
  });

  it('names the regional endpoints as the SDK does', () => {
    expect(regionalHost('dynamodb', 'us-east-1', {})).toBe('dynamodb.us-east-1.amazonaws.com');
    expect(regionalHost('secretsmanager', 'cn-north-1', {})).toBe(
      'secretsmanager.cn-north-1.amazonaws.com.cn',
    );
    expect(regionalHost('dynamodb', 'us-gov-west-1', { AWS_USE_FIPS_ENDPOINT: 'true' })).toBe(
      'dynamodb-fips.us-gov-west-1.amazonaws.com',
    );
  });

  it("reads a query's and a scan's every page, each from where the last one ended", async () => {
    const page = (n: number) => ({ id: { S: `item-${n}` } });
    const dynamo = await fake((seen, _, response) => {
      const start = (JSON.parse(seen.body) as { ExclusiveStartKey?: { id: { S: string } } })
        .ExclusiveStartKey;
      if (!start) json(response, 200, { Items: [page(1)], LastEvaluatedKey: page(1) });
      else if (start.id.S === 'item-1') json(response, 200, { Items: [page(2)], LastEvaluatedKey: page(2) });
      else json(response, 200, { Items: [page(3)] });
    });
    const wire = new DynamoWire(connectionFromEnv({ ...ENV, DYNAMODB_ENDPOINT: dynamo.endpoint }), FAST);
    const input = { TableName: 't', KeyConditionExpression: 'id = :id' };
    expect(await queryAll(wire, input)).toEqual([page(1), page(2), page(3)]);
    expect(await scanAll(wire, { TableName: 't' })).toEqual([page(1), page(2), page(3)]);
    expect(dynamo.seen.map((seen) => seen.target)).toEqual([
      ...Array(3).fill('DynamoDB_20120810.Query'),
      ...Array(3).fill('DynamoDB_20120810.Scan'),
    ]);
    expect(JSON.parse(dynamo.seen[2]?.body ?? '{}')).toEqual({ ...input, ExclusiveStartKey: page(2) });
  });

  it("gives a transaction without a ClientRequestToken one, the same on each attempt, and keeps a caller's own", async () => {
    const dynamo = await fake((_, attempt, response) =>
      attempt === 1 ? json(response, 500, { __type: 'InternalServerError' }) : json(response, 200, {}),
    );
    const wire = new DynamoWire(connectionFromEnv({ ...ENV, DYNAMODB_ENDPOINT: dynamo.endpoint }), FAST);
    await wire.call('TransactWriteItems', { TransactItems: [] });
    await wire.call('TransactWriteItems', { TransactItems: [], ClientRequestToken: 'mine' });
    const tokens = dynamo.seen.map(
      (seen) => (JSON.parse(seen.body) as { ClientRequestToken?: string }).ClientRequestToken,
    );
    expect(tokens[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(tokens).toEqual([tokens[0], tokens[0], 'mine']);
  });

  it("gives a cancelled transaction's reasons, item by item", async () => {
    const dynamo = await fake((_, __, response) =>
      json(response, 400, {
        __type: 'com.amazonaws.dynamodb.v20120810#TransactionCanceledException',
        Message: 'Transaction cancelled',
        CancellationReasons: [
          { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed' },
          { Code: 'None' },
        ],
      }),
    );
    const wire = new DynamoWire(connectionFromEnv({ ...ENV, DYNAMODB_ENDPOINT: dynamo.endpoint }), FAST);
    const error = await wire.call('TransactWriteItems', { TransactItems: [] }).catch((e: unknown) => e);
    expect(cancellationReasons(error)).toEqual([
      { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed' },
      { Code: 'None' },
    ]);
    expect(dynamo.seen).toHaveLength(1);
  });

  it("has no SDK client in a function's store: a call still made through one fails by name", async () => {
    await expect(NO_SDK_CLIENT.send({} as never)).rejects.toThrow(/no SDK client.*wire/);
  });
});

describe('Secrets Manager without the SDK', () => {
  const where = (url: string) => ({
    url,
    region: 'eu-west-1',
    credentials: { accessKeyId: 'AKIDENV', secretAccessKey: 'env-secret', sessionToken: 'env-session' },
  });

  it('reads a version of a secret by its JSON 1.1 protocol, signed for secretsmanager', async () => {
    const secrets = await fake((_, __, response) =>
      json(response, 200, { Name: 'n', SecretString: 'value-1' }),
    );
    expect(await getSecretValue(where(secrets.endpoint), 'arn:secret', 'AWSPREVIOUS')).toBe('value-1');
    expect(secrets.seen).toEqual([
      {
        target: 'secretsmanager.GetSecretValue',
        contentType: 'application/x-amz-json-1.1',
        body: JSON.stringify({ SecretId: 'arn:secret', VersionStage: 'AWSPREVIOUS' }),
        scope: 'eu-west-1/secretsmanager',
        token: 'env-session',
      },
    ]);
  });

  it('retries a 5xx and a throttle, and names what it cannot fix without retrying it', async () => {
    const flaky = await fake((_, attempt, response) => {
      if (attempt === 1) json(response, 500, { __type: 'InternalServiceError' });
      else if (attempt === 2) json(response, 400, { __type: 'ThrottlingException' });
      else json(response, 200, { SecretString: 'at-last' });
    });
    expect(await getSecretValue(where(flaky.endpoint), 'arn:a', 'AWSCURRENT')).toBe('at-last');
    expect(flaky.seen).toHaveLength(3);
    server?.closeAllConnections();
    server?.close();
    const missing = await fake((_, __, response) =>
      json(response, 400, {
        __type: 'ResourceNotFoundException',
        Message: "Secrets Manager can't find the specified secret value for staging label: AWSPREVIOUS",
      }),
    );
    const error = await getSecretValue(where(missing.endpoint), 'arn:b', 'AWSPREVIOUS').catch(
      (e: unknown) => e,
    );
    expect(error).toMatchObject({
      name: 'ResourceNotFoundException',
      message: expect.stringMatching(/can't find/),
    });
    expect(missing.seen).toHaveLength(1);
  });

  it('bounds a silent Secrets Manager: each of its 3 attempts ends after 2 s without an answer', async () => {
    const silent = await fake(() => {});
    const started = Date.now();
    const error = await getSecretValue(where(silent.endpoint), 'arn:c', 'AWSCURRENT').catch(
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ name: 'TimeoutError' });
    expect(silent.seen).toHaveLength(3);
    expect(Date.now() - started).toBeLessThan(7_500);
  }, 10_000);
});

describe('SES SendEmail without the SDK', () => {
  const where = (url: string) => ({
    url,
    region: 'eu-west-1',
    credentials: () => ({ accessKeyId: 'AKIDENV', secretAccessKey: 'env-secret' }),
  });
  const email = { from: 'alerts@example.com', to: 'dev@example.com', subject: 'Low', text: 'Below $5' };

  it('sends a Simple message by its REST-JSON protocol, signed for ses, and answers its MessageId', async () => {
    const ses = await fake((_, __, response) => json(response, 200, { MessageId: 'm-1' }));
    expect(await sendEmail(where(ses.endpoint), email)).toBe('m-1');
    expect(ses.seen).toHaveLength(1);
    expect(ses.seen[0]).toMatchObject({ target: undefined, scope: 'eu-west-1/ses' });
    expect(JSON.parse(ses.seen[0]?.body ?? '')).toEqual({
      FromEmailAddress: 'alerts@example.com',
      Destination: { ToAddresses: ['dev@example.com'] },
      Content: {
        Simple: {
          Subject: { Data: 'Low', Charset: 'UTF-8' },
          Body: { Text: { Data: 'Below $5', Charset: 'UTF-8' } },
        },
      },
    });
  });

  it("retries a 429, and names a refusal by its X-Amzn-Errortype header without retrying it (REST-JSON's errors)", async () => {
    const busy = await fake((_, attempt, response) => {
      if (attempt === 1) json(response, 429, { message: 'Maximum sending rate exceeded.' });
      else json(response, 200, { MessageId: 'm-2' });
    });
    expect(await sendEmail(where(busy.endpoint), email)).toBe('m-2');
    expect(busy.seen).toHaveLength(2);
    server?.closeAllConnections();
    server?.close();
    const rejected = await fake((_, __, response) =>
      response
        .writeHead(400, {
          'content-type': 'application/json',
          'x-amzn-errortype': 'MessageRejected:http://internal.amazon.com/coral/com.amazon.ses/',
        })
        .end(JSON.stringify({ message: 'Email address is not verified.' })),
    );
    const error = await sendEmail(where(rejected.endpoint), email).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'MessageRejected', message: 'Email address is not verified.' });
    expect(rejected.seen).toHaveLength(1);
  });
});
