/**
 * `npx tsx bench/sigv4.ts`: CPU to sign one request-path DynamoDB call, the SDK's signer
 * (@smithy/signature-v4 with the SDK client's SHA-256 and a credential provider) against `aws4`
 * (what functions/adapters/dynamodb/wire.ts signs with; the decision this bench backs), on Node 22
 * when scripts/install-lambda-runtime.sh has installed it. The request is a BatchGetItem of key and
 * account with a session token as long as Lambda's. CPU is process.cpuUsage around each signature,
 * back to back and with GAP_MS (5) idle before each (as an instance between invocations, when caches
 * are cold); the two take turns, ROUNDS (8) rounds of 100 signatures. Prints each way's median and
 * lowest, in microseconds per signature.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SignatureV4 } from '@smithy/signature-v4';
import aws4 from 'aws4';
import { runOnNode22 } from './on-node22.js';

runOnNode22();

const GAP_MS = Number(process.env.GAP_MS ?? 5);
const ROUNDS = Number(process.env.ROUNDS ?? 8);
const PER_ROUND = 100;

const credentials = {
  accessKeyId: 'ASIAEXAMPLEEXAMPLE00',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  // Lambda's role credentials carry a session token of about 1,000 characters.
  sessionToken: 'IQoJb3JpZ2luX2VjE'.repeat(60),
};
const client = new DynamoDBClient({ region: 'us-east-1', credentials });
const host = 'dynamodb.us-east-1.amazonaws.com';
const target = 'DynamoDB_20120810.BatchGetItem';
const body = JSON.stringify({
  RequestItems: {
    'svc-keys': { Keys: [{ keyHash: { S: 'a'.repeat(64) } }], ConsistentRead: true },
    'svc-accounts': { Keys: [{ accountId: { S: 'acme' } }], ConsistentRead: true },
  },
});

const sdkSigner = new SignatureV4({
  service: 'dynamodb',
  region: client.config.region,
  credentials: client.config.credentials,
  sha256: client.config.sha256,
});
const region = await client.config.region();

const ways: Record<string, () => Promise<unknown>> = {
  "SDK's signer": () =>
    sdkSigner.sign(
      {
        method: 'POST',
        protocol: 'https:',
        hostname: host,
        path: '/',
        query: {},
        headers: { host, 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': target },
        body,
      },
      { signingDate: new Date() },
    ),
  // As wire.ts calls it: the client's credential provider, then the signature.
  aws4: async () =>
    aws4.sign(
      {
        service: 'dynamodb',
        region,
        method: 'POST',
        host,
        path: '/',
        headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': target },
        body,
      },
      await client.config.credentials(),
    ),
};

async function round(sign: () => Promise<unknown>, gapMs: number): Promise<number> {
  let cpu = 0;
  for (let i = 0; i < PER_ROUND; i++) {
    if (gapMs > 0) await new Promise((resolve) => setTimeout(resolve, gapMs));
    const start = process.cpuUsage();
    await sign();
    const used = process.cpuUsage(start);
    cpu += used.user + used.system;
  }
  return cpu / PER_ROUND;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? Number.NaN;
console.log(
  `Node ${process.version}; CPU per signature, microseconds (median and lowest of ${ROUNDS} rounds)`,
);
console.log('| way | back to back | lowest | paced | lowest |');
console.log('|---|---|---|---|---|');
const results: Record<string, { tight: number[]; paced: number[] }> = {};
for (const name of Object.keys(ways)) results[name] = { tight: [], paced: [] };
for (let r = 0; r < ROUNDS; r++)
  for (const [name, sign] of Object.entries(ways)) {
    results[name]?.tight.push(await round(sign, 0));
    results[name]?.paced.push(await round(sign, GAP_MS));
  }
for (const [name, { tight, paced }] of Object.entries(results))
  console.log(
    `| ${name} | ${median(tight).toFixed(1)} | ${Math.min(...tight).toFixed(1)} | ${median(paced).toFixed(1)} (${GAP_MS} ms apart) | ${Math.min(...paced).toFixed(1)} |`,
  );
client.destroy();
