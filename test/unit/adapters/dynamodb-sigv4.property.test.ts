/**
 * The request path's own SigV4 signer (adapters/dynamodb/sigv4.ts) against the SDK's
 * (@smithy/signature-v4, with the SDK client's SHA-256, as wire.ts used it before): over generated
 * credentials (with and without a session token, odd characters and spaces included), regions,
 * endpoints (ports, paths with dot segments and characters to escape), operations, bodies (any
 * unicode, lone surrogates included) and times, the two give the same headers, `authorization`
 * included. A signature DynamoDB rejects would fail every call of the request path.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SignatureV4 } from '@smithy/signature-v4';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DynamoSigner, type SigningCredentials } from '../../../functions/adapters/dynamodb/sigv4.js';

const sha256 = new DynamoDBClient({ region: 'us-east-1' }).config.sha256;

async function sdkHeaders(
  region: string,
  endpoint: { hostname: string; port: number | undefined; path: string },
  target: string,
  body: string,
  credentials: SigningCredentials,
  date: Date,
) {
  const { sessionToken, ...keys } = credentials;
  const identity = sessionToken === undefined ? keys : { ...keys, sessionToken };
  const signer = new SignatureV4({ service: 'dynamodb', region, credentials: identity, sha256 });
  const host = endpoint.port ? `${endpoint.hostname}:${endpoint.port}` : endpoint.hostname;
  const signed = await signer.sign(
    {
      method: 'POST',
      protocol: 'https:',
      hostname: endpoint.hostname,
      ...(endpoint.port ? { port: endpoint.port } : {}),
      path: endpoint.path,
      query: {},
      headers: { host, 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': target },
      body,
    },
    { signingDate: date },
  );
  return signed.headers;
}

const token = fc.oneof(
  fc.constant(undefined),
  fc.constant(''),
  fc.base64String({ minLength: 4, maxLength: 900 }),
  fc.string({ minLength: 1, maxLength: 40 }),
);
const credentials = fc.record({
  accessKeyId: fc.stringMatching(/^[A-Z0-9]{16,20}$/),
  secretAccessKey: fc.string({ minLength: 1, maxLength: 40 }),
  sessionToken: token,
});
const region = fc.constantFrom('us-east-1', 'eu-west-1', 'ap-southeast-2', 'us-gov-west-1', 'local');
const segment = fc.oneof(
  fc.constantFrom('.', '..', '', 'a b', "it's", '~x_y-z', '%2F', 'é'),
  fc.string({ maxLength: 6 }),
);
const path = fc
  .tuple(fc.array(segment, { maxLength: 4 }), fc.boolean())
  .map(([parts, slash]) => `/${parts.join('/')}${slash ? '/' : ''}`)
  .filter((value) => {
    try {
      encodeURIComponent(value);
      return true;
    } catch {
      return false; // a lone surrogate in a path: neither signer can encode it
    }
  });
const endpoint = fc.record({
  hostname: fc.constantFrom(
    'dynamodb.us-east-1.amazonaws.com',
    '127.0.0.1',
    'localhost',
    'ddb.example.internal',
  ),
  port: fc.option(fc.integer({ min: 1, max: 65_535 }), { nil: undefined }),
  path: fc.oneof(fc.constant('/'), path),
});
const target = fc.constantFrom(
  'DynamoDB_20120810.GetItem',
  'DynamoDB_20120810.BatchGetItem',
  'DynamoDB_20120810.TransactWriteItems',
);
const body = fc.oneof(fc.json(), fc.string({ unit: 'binary', maxLength: 200 }));
const date = fc.date({
  min: new Date('1999-12-31T00:00:00Z'),
  max: new Date('2099-12-31T23:59:59Z'),
  noInvalidDate: true,
});

describe('DynamoSigner', () => {
  it('signs as the SDK signer signs: the same headers and the same authorization', async () => {
    await fc.assert(
      fc.asyncProperty(region, endpoint, target, body, credentials, date, async (r, e, t, b, c, d) => {
        const ours = new DynamoSigner(r, 'dynamodb', {
          host: e.port ? `${e.hostname}:${e.port}` : e.hostname,
          path: e.path,
        }).sign(t, b, c, d);
        expect(ours).toEqual(await sdkHeaders(r, e, t, b, c, d));
      }),
      { numRuns: 400 },
    );
  });

  it('keeps its signing key for the day and derives it again for a new day or new credentials', async () => {
    const signer = new DynamoSigner('us-east-1', 'dynamodb', {
      host: 'dynamodb.us-east-1.amazonaws.com',
      path: '/',
    });
    const endpoint = { hostname: 'dynamodb.us-east-1.amazonaws.com', port: undefined, path: '/' };
    const first = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'one', sessionToken: 'a' };
    const rotated = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'two', sessionToken: 'b' };
    const target = 'DynamoDB_20120810.GetItem';
    for (const [creds, when] of [
      [first, '2026-11-25T23:59:59Z'],
      [first, '2026-11-26T00:00:00Z'],
      [rotated, '2026-11-26T00:00:01Z'],
      [first, '2026-11-26T00:00:02Z'],
    ] as const) {
      const at = new Date(when);
      expect(signer.sign(target, '{}', creds, at)).toEqual(
        await sdkHeaders('us-east-1', endpoint, target, '{}', creds, at),
      );
    }
  });

  it('refuses credentials without a key id or secret, as the SDK signer does', () => {
    const signer = new DynamoSigner('us-east-1', 'dynamodb', { host: 'h', path: '/' });
    expect(() =>
      signer.sign('DynamoDB_20120810.GetItem', '{}', { accessKeyId: 'A' } as SigningCredentials, new Date()),
    ).toThrow('Resolved credential object is not valid');
  });
});
